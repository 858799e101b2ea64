import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../kong/stand-in/index.js';
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
 * The audit's failures, end to end: client → stand-in → real plugin server → index in real Redis → pods.
 * No collector runs, so the index keeps calling a dead pod healthy: only the plugin's own view of its
 * upstream failures (the log phase) can keep it away. /v1/completions bodies are routed on load among the
 * pods the index calls healthy, and `fallback: kong-default` leaves Kong's target when none is.
 */

const PREFIX = 'kinf-e2e-uf';
const MODEL = 'test-model';
const COMPLETIONS_PATH = '/v1/completions';
const KDEF = '/kdef';
let redis: TestRedis;
let plugin: BuiltPlugin;
let gw: Gateway;
let service: SseUpstream;
const pods: Record<string, SseUpstream> = {};

const chatBody = (q: string): string =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: LONG_SYSTEM_PROMPT },
      { role: 'user', content: q },
    ],
  });

/** One request; returns the status and which upstream answered (x-pod), after its log phase has run. */
async function send(path: string, body: string): Promise<{ status: number; pod: string | null }> {
  const r = await fetch(gw.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  await r.arrayBuffer();
  await gw.idle();
  return { status: r.status, pod: r.headers.get('x-pod') };
}

async function seed(state: (id: string) => { healthy: boolean }, holder = 'pod-a'): Promise<void> {
  const keys = await keysFor(config, JSON.parse(chatBody('warm-up')) as unknown);
  await seedIndex(
    redis.url,
    PREFIX,
    MODEL,
    Object.entries(pods).map(([id, s]) => ({
      id,
      address: `127.0.0.1:${s.port}`,
      holds: id === holder ? keys.slice(0, keys.length - 2) : [],
      state: state(id),
    })),
  );
}

let config: Record<string, unknown>;

beforeAll(async () => {
  [redis, plugin, service] = await Promise.all([startRedis(), buildPlugin(), startSseUpstream('service')]);
  for (const id of ['pod-a', 'pod-b', 'pod-c']) pods[id] = await startSseUpstream(id);
  config = { redis_url: redis.url, redis_key_prefix: PREFIX, redis_timeout_ms: 200 };
  await seed(() => ({ healthy: true }));
  const kdef = { ...config, fallback: 'kong-default' };
  const route = (name: string, paths: string[], cfg: Record<string, unknown>, strip = false) => ({
    name,
    paths,
    methods: ['POST'],
    strip_path: strip,
    response_buffering: false,
    plugins: [{ name: 'kinference', config: cfg }],
  });
  gw = await startPluginGateway(plugin, service.url, config, {
    kongConfig: {
      _format_version: '3.0',
      services: [
        {
          name: 'vllm',
          url: service.url,
          retries: 0,
          routes: [route('chat', [CHAT_PATH, COMPLETIONS_PATH], config)],
        },
        { name: 'vllm-kdef', url: service.url, retries: 0, routes: [route('kdef', [KDEF], kdef, true)] },
      ],
    },
  });
  // Open the routers' Redis connections.
  expect((await send(CHAT_PATH, chatBody('warm-up'))).pod).toBe('pod-a');
  expect((await send(`${KDEF}${CHAT_PATH}`, chatBody('warm-up'))).pod).toBe('pod-a');
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([redis?.stop(), service?.close(), ...Object.values(pods).map((p) => p.close())]);
  plugin?.cleanup();
});

describe('e2e: upstream failures and pods the index calls unhealthy', () => {
  it('/v1/completions (a body that is not chat) goes to a pod the index calls healthy', async () => {
    // The collector has marked pod-a unhealthy; chat requests have not looked the pods up since.
    await seed((id) => ({ healthy: id !== 'pod-a' }));
    const body = JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 4 });
    for (let i = 0; i < 4; i++) {
      const r = await send(COMPLETIONS_PATH, body);
      expect(r.status).toBe(200);
      expect(r.pod).toMatch(/^pod-[bc]$/);
    }
    await seed(() => ({ healthy: true }));
  });

  it('fallback: kong-default sends to the service url when no pod is healthy', async () => {
    await seed(() => ({ healthy: false }));
    for (let i = 0; i < 3; i++)
      expect(await send(`${KDEF}${CHAT_PATH}`, chatBody(`q${i}`))).toEqual({
        status: 200,
        pod: 'service',
      });
    // least-loaded still picks a pod (the collector may be the one that is wrong)
    expect((await send(CHAT_PATH, chatBody('q'))).pod).toMatch(/^pod-[abc]$/);
    await seed(() => ({ healthy: true }));
    expect((await send(`${KDEF}${CHAT_PATH}`, chatBody('back'))).pod).toBe('pod-a');
  });

  it('a crashed prefix holder costs one 502, not every request until the collector notices', async () => {
    expect((await send(CHAT_PATH, chatBody('before'))).pod).toBe('pod-a');
    await pods['pod-a']!.close(); // connections are refused from now on; the index still says healthy
    const results = [];
    for (let i = 0; i < 10; i++) results.push(await send(CHAT_PATH, chatBody(`after ${i}`)));
    expect(results[0]).toEqual({ status: 502, pod: null });
    for (const r of results.slice(1))
      expect(r).toMatchObject({ status: 200, pod: expect.stringMatching(/^pod-[bc]$/) });

    // After the backoff (~1 s) the next request probes pod-a again: refused, out for ~2 s.
    await new Promise((r) => setTimeout(r, 1100));
    expect((await send(CHAT_PATH, chatBody('probe'))).status).toBe(502);
    for (let i = 0; i < 3; i++) expect((await send(CHAT_PATH, chatBody(`later ${i}`))).status).toBe(200);
  });
});
