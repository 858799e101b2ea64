import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway, GatewayEvent } from '../../kong/stand-in/index.js';
import { waitFor } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startSseUpstream, type SseUpstream } from '../02-integration/kong/test-servers.js';
import {
  buildPlugin,
  CHAT_PATH,
  keysFor,
  LONG_SYSTEM_PROMPT,
  seedIndex,
  startPluginGateway,
  type BuiltPlugin,
} from '../02-integration/plugin/harness.js';

/**
 * End to end through the OpenAI Node SDK (streaming): client → stand-in → real plugin server → index in real
 * Redis → SSE upstreams that stream like vLLM. The chosen pod is the prefix holder, the stream is not
 * buffered, and every failure the plugin can meet still returns an upstream's answer, never an error.
 */

const PREFIX = 'kinf-e2e-fo';
const MODEL = 'test-model';
let redis: TestRedis;
let plugin: BuiltPlugin;
let gw: Gateway;
let service: SseUpstream; // the Kong service url: where a request goes when the plugin does nothing
const pods: Record<string, SseUpstream> = {};
let client: OpenAI;
let faultOn: string | null = null;
const events: GatewayEvent[] = [];
/** The stand-in's log (Kong's error.log): the plugin's fallback lines arrive here from its log phase. */
const logLines: string[] = [];

const messages = (q: string): OpenAI.Chat.ChatCompletionMessageParam[] => [
  { role: 'system', content: LONG_SYSTEM_PROMPT },
  { role: 'user', content: q },
];

/** The upstream request `servedBy` got last: the x-kinference-* headers the plugin set (expose_headers). */
function lastUpstreamRequest(servedBy: string): SseUpstream['requests'][number] {
  const up = servedBy === 'service' ? service : pods[servedBy];
  const req = up?.requests.at(-1);
  if (!req) throw new Error(`no request reached ${servedBy}`);
  return req;
}

/** Streams one chat completion; returns the text and which upstream produced it (from the chunk ids). */
async function chat(q: string): Promise<{ text: string; servedBy: string }> {
  const stream = await client.chat.completions.create({ model: MODEL, messages: messages(q), stream: true });
  let text = '';
  let id = '';
  for await (const chunk of stream) {
    id ||= chunk.id;
    text += chunk.choices[0]?.delta.content ?? '';
  }
  return { text, servedBy: /^chatcmpl-(.+)-\d+$/.exec(id)?.[1] ?? '?' };
}

beforeAll(async () => {
  [redis, plugin, service] = await Promise.all([startRedis(), buildPlugin(), startSseUpstream('service')]);
  for (const id of ['pod-a', 'pod-b', 'pod-c']) pods[id] = await startSseUpstream(id);
  // expose_headers: the upstream request carries the decision (x-kinference-pod, x-kinference-fallback).
  const config = {
    redis_url: redis.url,
    redis_key_prefix: PREFIX,
    redis_timeout_ms: 200,
    expose_headers: true,
  };
  const keys = await keysFor(config, { model: MODEL, messages: messages('warm-up'), stream: true });
  await seedIndex(
    redis.url,
    PREFIX,
    MODEL,
    Object.entries(pods).map(([id, s]) => ({
      id,
      address: `127.0.0.1:${s.port}`,
      // pod-c holds the shared system prompt (all but the blocks of the varying question)
      holds: id === 'pod-c' ? keys.slice(0, keys.length - 2) : [],
    })),
  );
  gw = await startPluginGateway(plugin, service.url, config, {
    onEvent: (e) => events.push(e),
    logger: (level, msg) => logLines.push(`[${level}] ${msg}`),
    injectStepError: (method, phase) => (phase === 'access' && method === faultOn ? 'injected fault' : null),
  });
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test', maxRetries: 0 });
  await chat('warm-up'); // opens the router's Redis connection
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([redis?.stop(), service?.close(), ...Object.values(pods).map((p) => p.close())]);
  plugin?.cleanup();
});

describe('e2e: OpenAI SDK (streaming) → Kong stand-in → kinference → real Redis', () => {
  it('routes to the pod holding the prompt prefix', async () => {
    for (const q of ['What does rule 3 say?', 'And rule 44?']) {
      const r = await chat(q);
      expect(r.servedBy).toBe('pod-c');
      expect(r.text).toBe('hello from pod-c and goodbye');
    }
  });

  it('does not buffer the stream: the first token arrives while the pod is still generating', async () => {
    const pod = pods['pod-c']!;
    const held = await startSseUpstream('held', { hold: true });
    try {
      // Swap pod-c's address for a holding upstream, so the test controls when generation ends.
      await seedIndex(redis.url, PREFIX, MODEL, [{ id: 'pod-c', address: `127.0.0.1:${held.port}` }]);
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: messages('Rule 9?'),
        stream: true,
      });
      const it = stream[Symbol.asyncIterator]();
      const first = await it.next(); // role chunk
      const second = await it.next(); // first content: delivered before release()
      expect(first.done).toBe(false);
      expect(second.value?.choices[0]?.delta.content).toBe('hello from held');
      expect(held.requests).toHaveLength(1);
      held.release();
      let rest = '';
      for (let n = await it.next(); !n.done; n = await it.next())
        rest += n.value.choices[0]?.delta.content ?? '';
      expect(rest).toBe(' and goodbye');
    } finally {
      await seedIndex(redis.url, PREFIX, MODEL, [{ id: 'pod-c', address: `127.0.0.1:${pod.port}` }]);
      await held.close();
    }
  });

  it('Redis killed: the request is routed on load to a pod (not the service url), and routing recovers', async () => {
    await redis.kill();
    try {
      const r = await chat('Rule 5 while Redis is down?');
      // The load-only fallback picks one of the pods the router last knew; the service url means the
      // router gave up (threw, or found no pods), which is the broken behaviour this test names.
      expect(r.servedBy).toMatch(/^pod-[abc]$/);
      expect(r.text).toBe(`hello from ${r.servedBy} and goodbye`);
      const sent = lastUpstreamRequest(r.servedBy).headers;
      expect(sent['x-kinference-fallback']).toMatch(/^index_(error|timeout)$/);
      expect(sent['x-kinference-pod']).toBe(r.servedBy);
      // ...and the fallback is said once in Kong's log, with its reason and where the request went.
      await gw.idle();
      expect(logLines.join('\n')).toMatch(
        /fallback index_(error|timeout), request routed on load to pod-[abc]/,
      );
    } finally {
      await redis.restart();
    }
    // The restarted Redis is empty: re-seed, as the collector would on its next events.
    const keys = await keysFor(
      { redis_url: redis.url },
      { model: MODEL, messages: messages('x'), stream: true },
    );
    await seedIndex(redis.url, PREFIX, MODEL, [
      { id: 'pod-a', address: `127.0.0.1:${pods['pod-a']!.port}` },
      { id: 'pod-b', address: `127.0.0.1:${pods['pod-b']!.port}` },
      { id: 'pod-c', address: `127.0.0.1:${pods['pod-c']!.port}`, holds: keys.slice(0, keys.length - 2) },
    ]);
    await waitFor('routing recovers', async () => (await chat('Rule 6?')).servedBy === 'pod-c', 15_000, 200);
  });

  it('an invalid body gets the upstream’s own answer, not a gateway error', async () => {
    const r = await fetch(gw.url + CHAT_PATH, {
      method: 'POST',
      body: '{"model": "test-model", "messages": [',
    });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({
      object: 'chat.completion',
      choices: [{ message: { content: 'hello from service' } }],
    });
    expect(lastUpstreamRequest('service').headers['x-kinference-fallback']).toBe('body_not_json');
  });

  it('an exception inside the plugin lets the request through to the service url', async () => {
    faultOn = 'kong.service.set_target';
    try {
      const r = await chat('Rule 7 with a failing PDK call?');
      expect(r.servedBy).toBe('service');
      expect(r.text).toBe('hello from service and goodbye');
    } finally {
      faultOn = null;
    }
  });

  it('plugin server killed: requests still get answers while it is down, and routing returns after the respawn', async () => {
    const proc = gw.plugins.get('kinference')!.server;
    const spawns = proc.spawns;
    await proc.kill('SIGKILL');
    const seen = events.length;
    const during = await chat('Rule 8 while the plugin server is down?');
    // Either the RPC failed and Kong let the request through to the service url (failed_open), or the
    // respawned server took it ("no plugin instance" → new instance) and the plugin routed it to a pod.
    // What the stand-in did decides which upstream must have answered.
    const access = events.slice(seen).find((e) => e.phase === 'access');
    expect(access).toBeDefined();
    if (access!.outcome.kind === 'failed_open') expect(during.servedBy).toBe('service');
    else expect(during.servedBy).toMatch(/^pod-[abc]$/);
    expect(during.text).toBe(`hello from ${during.servedBy} and goodbye`);
    await waitFor('respawn', () => proc.spawns > spawns, 5000);
    await gw.pluginServersReady(10_000);
    // The new process has a cold router: its first lookup may fall back; it routes to the holder again soon.
    await waitFor(
      'routing after respawn',
      async () => (await chat('Rule 10?')).servedBy === 'pod-c',
      15_000,
      100,
    );
  });
});
