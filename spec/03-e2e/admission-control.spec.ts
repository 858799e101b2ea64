import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import {
  postChat,
  promCounter as counter,
  startFullSystem,
  type FullSystem,
} from '../helpers/full-system.js';
import { waitFor } from '../helpers/ports.js';

/**
 * Admission control end to end: emulated pods → collector → Redis → the plugin in the real plugin server
 * behind the stand-in. The ITL guard is set so that a pod already decoding a ~130-token prompt is over the
 * bound (a decode step of 50 ms plus 1 ms per context token against 100 ms): each pod takes one stream at a time,
 * the rest are answered 429 with Retry-After, and once the streams end (Kong's log phase) pods take work again.
 */

let sys: FullSystem;

const chat = (q: string, maxTokens: number): string =>
  JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: q }],
    max_tokens: maxTokens,
    stream: true,
  });

const post = (body: string): Promise<Response> => postChat(sys.gw.url, body);

beforeAll(async () => {
  sys = await startFullSystem('kinf-e2e-adm', {
    itl_slo_ms: 100,
    itl_decode_base_ms: 50,
    itl_decode_ms_per_1k_context: 1000,
    // This model, not the pods' measured one: the test needs a pod over the bound once it decodes.
    itl_decode_from_metrics: false,
    shed_ttft_slo_ms: 3_600_000,
  });
}, 120_000);

afterAll(async () => {
  await sys?.close();
});

describe('e2e: admission control (itl_slo_ms + shed_ttft_slo_ms) through the real plugin server', () => {
  it('serves at most one stream per pod, sheds the rest with 429 + Retry-After, then admits again', async () => {
    // The first request loads the tokenizer and opens Redis; once its log phase has run, pods are idle.
    await waitFor('an idle pod admits', async () => {
      const r = await post(chat('warm up', 1));
      await r.text();
      return r.status === 200;
    });
    const before = await Promise.all(
      sys.fleet.pods.map((p) => counter(p.base, 'vllm:request_success_total')),
    );

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
    const after = await Promise.all(sys.fleet.pods.map((p) => counter(p.base, 'vllm:request_success_total')));
    const perPod = after.map((n, i) => n - before[i]!);
    expect(perPod.reduce((a, b) => a + b, 0)).toBe(served.length);
    expect(Math.max(...perPod)).toBe(1);
    expect(sys.service.requests.length).toBe(0); // nothing fell through to the service url

    // The streams ended, the log phase released them: the pods take work again.
    await waitFor('admitted again', async () => {
      const r = await post(chat('after the burst', 1));
      await r.text();
      return r.status === 200;
    });
  }, 60_000);
});
