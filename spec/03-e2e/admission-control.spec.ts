import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../kong/stand-in/index.js';
import type { Collector } from '../../src/collector/collector.js';
import { createKvIndex } from '../../src/index/index.js';
import type { KvIndex } from '../../src/index/kv-index.js';
import { pluginConfigFromFleet } from '../../src/router/from-fleet.js';
import { startCollector } from '../helpers/collector/collector-harness.js';
import { waitFor } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { MODEL, startTestFleet, type TestFleet } from '../02-integration/emulator/emulator-fleet.js';
import { startSseUpstream, type SseUpstream } from '../02-integration/kong/test-servers.js';
import { buildPlugin, startPluginGateway, type BuiltPlugin } from '../02-integration/plugin/harness.js';

/**
 * Admission control end to end: emulated pods → collector → Redis → the plugin in the real plugin server
 * behind the stand-in. The ITL guard is set so that a pod already decoding a ~130-token prompt is over the
 * bound (a decode step of 50 ms plus 1 ms per context token against 100 ms): each pod takes one stream at a time,
 * the rest are answered 429 with Retry-After, and once the streams end (Kong's log phase) pods take work again.
 */

const PREFIX = 'kinf-e2e-adm';
let redis: TestRedis;
let fleet: TestFleet;
let index: KvIndex;
let collector: Collector;
let plugin: BuiltPlugin;
let service: SseUpstream;
let gw: Gateway;

const chat = (q: string, maxTokens: number): string =>
  JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: q }],
    max_tokens: maxTokens,
    stream: true,
  });

const post = (body: string): Promise<Response> =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });

/** Sum of a Prometheus counter over all its label sets. */
async function counter(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

beforeAll(async () => {
  [redis, plugin, service] = await Promise.all([startRedis(), buildPlugin(), startSseUpstream('service')]);
  fleet = await startTestFleet(3);
  index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: PREFIX });
  collector = startCollector(index, fleet.config.pods ?? []);
  await collector.start();
  await waitFor(
    'pods registered',
    async () => (await index.listPods(MODEL)).filter((p) => p.address).length === 3,
    20_000,
  );
  gw = await startPluginGateway(plugin, service.url, {
    ...pluginConfigFromFleet({ ...fleet.config, redis_url: redis.url }, MODEL, 'e2e fleet'),
    redis_key_prefix: PREFIX,
    redis_timeout_ms: 200,
    itl_slo_ms: 100,
    itl_decode_base_ms: 50,
    itl_decode_ms_per_1k_context: 1000,
    shed_ttft_slo_ms: 3_600_000,
  });
}, 120_000);

afterAll(async () => {
  await gw?.close();
  await collector?.stop();
  await index?.close();
  await fleet?.close();
  await Promise.all([redis?.stop(), service?.close()]);
  plugin?.cleanup();
});

describe('e2e: admission control (itl_slo_ms + shed_ttft_slo_ms) through the real plugin server', () => {
  it('serves at most one stream per pod, sheds the rest with 429 + Retry-After, then admits again', async () => {
    // The first request loads the tokenizer and opens Redis; once its log phase has run, pods are idle.
    await waitFor('an idle pod admits', async () => {
      const r = await post(chat('warm up', 1));
      await r.text();
      return r.status === 200;
    });
    const before = await Promise.all(fleet.pods.map((p) => counter(p.base, 'vllm:request_success_total')));

    // Six long streams at once: three pods, each busy pod over the bound.
    const responses = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        post(chat(`question ${i}: ${'explain the clause in detail. '.repeat(20)}`, 400)),
      ),
    );
    const shed = responses.filter((r) => r.status === 429);
    const served = responses.filter((r) => r.status === 200);
    expect(shed.length + served.length).toBe(6);
    expect(served.length).toBeGreaterThanOrEqual(1);
    expect(served.length).toBeLessThanOrEqual(3);
    for (const r of shed) {
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(await r.json()).toMatchObject({
        error: { type: 'rate_limit_error', code: 'itl_slo_exceeded' },
      });
    }
    const bodies = await Promise.all(served.map((r) => r.text()));
    for (const b of bodies) expect(b).toContain('data: [DONE]');
    // No pod ran two of them: the guard spread what it admitted.
    const after = await Promise.all(fleet.pods.map((p) => counter(p.base, 'vllm:request_success_total')));
    const perPod = after.map((n, i) => n - before[i]!);
    expect(perPod.reduce((a, b) => a + b, 0)).toBe(served.length);
    expect(Math.max(...perPod)).toBe(1);
    expect(service.requests.length).toBe(0); // nothing fell through to the service url

    // The streams ended, the log phase released them: the pods take work again.
    await waitFor('admitted again', async () => {
      const r = await post(chat('after the burst', 1));
      await r.text();
      return r.status === 200;
    });
  }, 60_000);
});
