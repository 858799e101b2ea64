import { describe, expect, it } from 'vitest';
import { PluginConfigSchema, type PluginConfig } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { createRouter, defaultResources, requestKeys } from '../../../src/router/index.js';
import { QWEN3_TEMPLATE, QWEN3_TOKENIZER } from '../../helpers/qwen3.js';

const MODEL = 'Qwen/Qwen3-8B';
const SYSTEM = 'You are a meticulous assistant for the ACME support desk. '.repeat(150);
const NOW = 1_000_000;

/** The user turn is long enough (≈ 100 tokens) to fill blocks of its own after the shared system prompt. */
const body = (user: string): string =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: `${user} `.repeat(12) },
    ],
  });

const config = (over: Partial<PluginConfig> = {}): PluginConfig =>
  validateConfig(
    PluginConfigSchema,
    { index: 'memory', tokenizer: QWEN3_TOKENIZER, chat_template: QWEN3_TEMPLATE, ...over },
    'test',
  );

/**
 * Three busy pods that hold nothing yet. Queued prefill work from the metrics (default calibration,
 * 0.33 ms/token): pod-a 3,000 tokens, pod-b and pod-c 4,000.
 */
async function busyRouter(cfg: PluginConfig) {
  const res = defaultResources(cfg);
  for (const [podId, queued] of [
    ['pod-a', 3000],
    ['pod-b', 4000],
    ['pod-c', 4000],
  ] as const)
    await res.index.upsertPodState(
      { model: MODEL, podId },
      {
        address: `10.0.0.${podId.at(-1)!.charCodeAt(0) - 96}:8000`,
        waiting: 1,
        meanQueuedPrefillTokens: queued,
        lastScrapeAtMs: NOW - 1,
        lastEventAtMs: NOW - 1,
      },
    );
  return createRouter(cfg, res, { clock: () => NOW });
}

describe('router: prompts it just sent count as about to be cached on that pod', () => {
  it('sends a second request with the same long system prompt behind the first, not to a cold pod', async () => {
    const cfg = config();
    const k1 = await requestKeys(cfg, body('What is the refund policy?'));
    const k2 = await requestKeys(cfg, body('How do I reset my password?'));
    let shared = 0;
    while (shared < Math.min(k1.length, k2.length) && k1[shared] === k2[shared]) shared++;
    expect(shared).toBeGreaterThan(100); // the system prompt: > 1,600 tokens
    expect(shared).toBeLessThan(k1.length); // the user turns differ in full blocks

    const router = await busyRouter(cfg);
    const first = await router.route(body('What is the refund policy?'));
    expect(first.target?.podId).toBe('pod-a'); // least queued work; nothing cached anywhere
    const P = first.promptTokens;

    const second = await router.route(body('How do I reset my password?'));
    const a = second.decision.candidates.find((c) => c.podId === 'pod-a')!;
    const b = second.decision.candidates.find((c) => c.podId === 'pod-b')!;
    // pod-a: the first prompt's shared blocks are credited, and its whole prefill is queued ahead.
    expect(a.cachedTokens).toBe(shared * 16);
    expect(a.queuedTokens).toBe(3000 + P);
    expect(a.reasons).toContain('cached credit includes a prompt sent here whose KV events are pending');
    // pod-b: cold, 4,000 queued. Without the credit pod-a would cost (3000 + P) + P tokens > 4000 + P.
    expect(b.cachedTokens).toBe(0);
    expect(b.queuedTokens).toBe(4000);
    expect(second.target?.podId).toBe('pod-a');
    expect(a.predictedTtftMs).toBeLessThan(b.predictedTtftMs);

    // Once the first response is back its reservation ends; the index has not seen the blocks (no KV
    // events in this test), so a third request is cold everywhere again and goes to the least busy pod.
    router.observe(first, null);
    router.observe(second, null);
    const third = await router.route(body('Where is my parcel?'));
    expect(third.decision.candidates.every((c) => c.cachedTokens === 0)).toBe(true);
    expect(third.target?.podId).toBe('pod-a');
    await router.close();
  });

  it('with reservations off (reservation_ttl_ms 0) nothing is credited', async () => {
    const cfg = config({ reservation_ttl_ms: 0 });
    const router = await busyRouter(cfg);
    expect((await router.route(body('What is the refund policy?'))).target?.podId).toBe('pod-a');
    const second = await router.route(body('How do I reset my password?'));
    expect(second.decision.candidates.every((c) => c.cachedTokens === 0)).toBe(true);
    // No reservation either: pod-a still looks least busy, so it wins on load alone.
    expect(second.target?.podId).toBe('pod-a');
    await router.close();
  });
});
