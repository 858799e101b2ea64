import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../kong/stand-in/index.js';
import { createKvIndex } from '../../src/index/index.js';
import { waitFor } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startSseUpstream, type SseUpstream } from '../02-integration/kong/test-servers.js';
import {
  buildPlugin,
  CHAT_PATH,
  LONG_SYSTEM_PROMPT,
  SEEDED_INDEX_CONFIG,
  seedIndex,
  startPluginGateway,
  type BuiltPlugin,
} from '../02-integration/plugin/harness.js';

/**
 * Two Kong nodes, each with its own plugin server, over one Redis (`share_reservations`): a request node A
 * has sent and the pod is still answering is queued work on that pod for node B, so B's next cold prompt
 * goes to an idle pod. With sharing off, B sees the pod idle and sends there too (the route that proves the
 * check can fail). Pods hold every stream after its first token, so A's reservation stays in flight.
 */

const MODEL = 'test-model';
const PREFIX = 'kinf-e2e-gw';
let redis: TestRedis;
let plugin: BuiltPlugin;
let service: SseUpstream;
const pods: Record<string, SseUpstream> = {};
const nodes: Gateway[] = [];

const config = (share: boolean): Record<string, unknown> => ({
  redis_url: redis.url,
  redis_key_prefix: `${PREFIX}-${share}`,
  redis_timeout_ms: 2000, // a loaded CI host: a lookup past its budget would route on load alone
  share_reservations: share,
  decision_workers: 0,
  ...SEEDED_INDEX_CONFIG,
});
const pathOf = (share: boolean): string => `/${share ? 'share' : 'alone'}${CHAT_PATH}`;

const body = (q: string): string =>
  JSON.stringify({
    model: MODEL,
    stream: true,
    messages: [
      { role: 'system', content: `${q} ${LONG_SYSTEM_PROMPT}` },
      { role: 'user', content: q },
    ],
  });

/** Sends through a node; resolves at the response headers (the pod holds the stream open). */
async function send(
  gw: Gateway,
  path: string,
  q: string,
): Promise<{ pod: string | null; done: Promise<void> }> {
  const r = await fetch(gw.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body(q),
  });
  expect(r.status).toBe(200);
  return { pod: r.headers.get('x-pod'), done: r.arrayBuffer().then(() => undefined) };
}

beforeAll(async () => {
  [redis, plugin, service] = await Promise.all([startRedis(), buildPlugin(), startSseUpstream('service')]);
  for (const id of ['pod-a', 'pod-b', 'pod-c']) pods[id] = await startSseUpstream(id, { hold: true });
  for (const share of [true, false])
    await seedIndex(
      redis.url,
      `${PREFIX}-${share}`,
      MODEL,
      Object.entries(pods).map(([id, s]) => ({ id, address: `127.0.0.1:${s.port}` })),
    );
  const route = (share: boolean) => ({
    name: share ? 'share' : 'alone',
    paths: [`/${share ? 'share' : 'alone'}`],
    methods: ['POST'],
    strip_path: true,
    response_buffering: false,
    plugins: [{ name: 'kinference', config: config(share) }],
  });
  const kongConfig = {
    _format_version: '3.0',
    services: [{ name: 'vllm', url: service.url, retries: 0, routes: [route(true), route(false)] }],
  };
  const started = await Promise.allSettled(
    [0, 1].map(() => startPluginGateway(plugin, service.url, config(true), { kongConfig })),
  );
  // Both kept before a failure is thrown, so afterAll closes the one that started.
  for (const s of started) if (s.status === 'fulfilled') nodes.push(s.value);
  for (const s of started) if (s.status === 'rejected') throw s.reason;
}, 120_000);

afterAll(async () => {
  for (const p of Object.values(pods)) p.release();
  await Promise.all(nodes.map((g) => g.close()));
  await Promise.all([redis?.stop(), service?.close(), ...Object.values(pods).map((p) => p.close())]);
  plugin?.cleanup();
});

describe('e2e: two Kong nodes, each its own plugin server, share their reservations through Redis', () => {
  for (const share of [true, false])
    it(`share_reservations ${share}: node B ${share ? 'counts' : 'cannot see'} node A's request in flight`, async () => {
      const [a, b] = nodes as [Gateway, Gateway];
      // Every pod idle: node A sends its cold prompt to the first pod.
      const first = await send(a, pathOf(share), 'What is the refund policy?');
      expect(first.pod).toBe('pod-a');
      if (share) {
        // A's reservation is written without waiting for Redis: B looks once it is there.
        const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: `${PREFIX}-${share}` });
        try {
          await waitFor(
            'node A’s reservation in Redis',
            async () => (await index.sharedReservations(MODEL, 0, 10)).length === 1,
          );
        } finally {
          await index.close();
        }
      }
      // Another cold prompt through node B, while pod-a is still answering A's.
      const second = await send(b, pathOf(share), 'How do I reset my password?');
      expect(second.pod).toBe(share ? 'pod-b' : 'pod-a');
      for (const p of Object.values(pods)) p.release();
      await Promise.all([first.done, second.done]);
      await Promise.all(nodes.map((g) => g.idle()));
      for (const p of Object.values(pods)) p.hold();
    });
});
