import { describe, expect, it } from 'vitest';
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import type { PodState } from '../../../src/core/types.js';
import type { KvIndex } from '../../../src/index/index.js';
import { createRouter, defaultResources } from '../../../src/router/index.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

const MODEL = 'Qwen/Qwen3-8B';
const NOW = 1_000_000;

function body(user: string, maxTokens = 1): string {
  return JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: `${user} ${'tell me more about it. '.repeat(100)}` }],
    max_tokens: maxTokens,
  });
}

/**
 * A decode step of 99 ms against a 100 ms bound: any prefill on a pod that is decoding breaks the bound,
 * so only an idle pod may take a request (the guard's one exception).
 */
function config(over: Partial<PluginConfig> = {}): PluginConfig {
  return qwen3RouterConfig({
    itl_slo_ms: 100,
    itl_decode_base_ms: 99,
    itl_decode_ms_per_1k_context: 0,
    shed_ttft_slo_ms: 3_600_000,
    ...over,
  });
}

async function fleet(index: KvIndex, over: Partial<PodState> = {}): Promise<void> {
  for (const [podId, address] of [
    ['pod-a', '10.0.0.1:8000'],
    ['pod-b', '10.0.0.2:8000'],
    ['pod-c', '10.0.0.3:8000'],
  ] as const)
    await index.upsertPodState(
      { model: MODEL, podId },
      { address, lastScrapeAtMs: NOW, lastEventAtMs: NOW, ...over },
    );
}

describe('ITL guard through the router (itl_slo_ms)', () => {
  it('gives each busy pod no more prefill than its decodes can bear, then sheds with Retry-After', async () => {
    const cfg = config();
    const res = defaultResources(cfg);
    await fleet(res.index);
    let now = NOW;
    const router = createRouter(cfg, res, { clock: () => now });
    const first = await router.route(body('one'));
    const second = await router.route(body('two'));
    const third = await router.route(body('three'));
    const pods = [first, second, third].map((o) => o.target?.podId);
    expect(new Set(pods).size).toBe(3); // one request per pod: each was idle when chosen
    for (const o of [first, second, third]) expect(o.flightId).not.toBeNull();

    const fourth = await router.route(body('four'));
    expect(fourth.target).toBeNull();
    expect(fourth.shed).toEqual({ status: 429, retryAfterS: 1 });
    for (const c of fourth.decision.candidates) {
      expect(c.withinItl).toBe(false);
      expect(c.predictedItlMs).toBeGreaterThan(100);
      expect(c.reasons.join(' ')).toMatch(
        /ITL guard: predicted ITL (\d+ ms|unbounded) over the 100 ms bound \(decode step model configured\)/,
      );
    }

    // The first answer ends and its prefill leaves the span (1 token × 100 ms): its pod is idle again.
    router.observe(first, null);
    now += 1_000;
    const fifth = await router.route(body('five'));
    expect(fifth.shed).toBeNull();
    expect(fifth.target?.podId).toBe(first.target?.podId);
  });

  it('counts every concurrent decision: six at once give one per idle pod and shed the other three', async () => {
    // Decisions interleave at their awaits (tokenize, lookup, limits). Between one request's prediction and
    // its booking nothing may yield, or a request deciding in between sees the pod idle and both are sent.
    const cfg = config();
    const res = defaultResources(cfg);
    await fleet(res.index);
    let now = NOW;
    const router = createRouter(cfg, res, { clock: () => now });
    await router.route(body('warm')).then((o) => router.observe(o, null));
    now += 1_000; // the warm-up's prefill has left the guard's window: every pod is idle
    const outs = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((u) => router.route(body(u))));
    const served = outs.filter((o) => o.target !== null).map((o) => o.target!.podId);
    expect(served.sort()).toEqual(['pod-a', 'pod-b', 'pod-c']);
    expect(outs.filter((o) => o.shed !== null)).toHaveLength(3);
  });

  it('a fallback books its pod in the turn it chose it: concurrent fallbacks spread over the pods', async () => {
    const pods = ['10.9.9.1:8000', '10.9.9.2:8000', '10.9.9.3:8000'];
    const cfg = config({ tokenizer: 'hf:/nonexistent/tokenizer.json', model_pods: { [MODEL]: pods } });
    const router = createRouter(cfg, defaultResources(cfg), { clock: () => NOW });
    const outs = await Promise.all(['a', 'b', 'c'].map((u) => router.route(body(u))));
    for (const o of outs) expect(o.fallbackReason).toBe('tokenizer_error');
    expect(outs.map((o) => o.target?.podId).sort()).toEqual(pods);
  });

  it('forgets requests whose log phase never came once a scrape shows the pods idle, not 10 min later', async () => {
    const cfg = config();
    const res = defaultResources(cfg);
    await fleet(res.index);
    let now = NOW;
    const router = createRouter(cfg, res, { clock: () => now });
    // One request per pod, their responses never reported (a lost log phase): every pod is "decoding".
    for (const user of ['one', 'two', 'three'])
      expect((await router.route(body(user))).target).not.toBeNull();
    now += 5_000;
    expect((await router.route(body('four'))).shed).not.toBeNull();
    // The collector's next scrape finds every pod idle: those requests are over.
    await fleet(res.index, { running: 0, waiting: 0, lastScrapeAtMs: now });
    now += 1_000;
    const five = await router.route(body('five'));
    expect(five.shed).toBeNull();
    expect(five.target).not.toBeNull();
  });

  it('without shedding, routes the request anyway to the best pod and says why', async () => {
    const cfg = config({ shed_ttft_slo_ms: 0 });
    const res = defaultResources(cfg);
    await fleet(res.index);
    const router = createRouter(cfg, res, { clock: () => NOW });
    for (const u of ['one', 'two', 'three']) await router.route(body(u));
    const fourth = await router.route(body('four'));
    expect(fourth.shed).toBeNull();
    expect(fourth.target).not.toBeNull();
    expect(fourth.decision.chosen?.withinItl).toBe(false);
  });

  it('refuses a pod whose KV cache cannot take the prompt (vLLM would preempt)', async () => {
    const cfg = config({ itl_decode_base_ms: 10 });
    const res = defaultResources(cfg);
    // 100,000 tokens of KV, 99.5% in use: 500 free, less the answers; pod-c has room.
    await fleet(res.index, { kvCapacityTokens: 100_000, kvUsage: 0.995, running: 4 });
    await res.index.upsertPodState({ model: MODEL, podId: 'pod-c' }, { kvUsage: 0.5 });
    const router = createRouter(cfg, res, { clock: () => NOW });
    const out = await router.route(body('one', 16));
    expect(out.target?.podId).toBe('pod-c');
    const refused = out.decision.candidates.filter((c) => !c.withinItl);
    expect(refused.map((c) => c.podId).sort()).toEqual(['pod-a', 'pod-b']);
    expect(refused[0]!.reasons.join(' ')).toMatch(/cannot take \d+ more tokens without preempting/);
  });

  it('is off by default: no verdicts, no flight records', async () => {
    const cfg = config({ itl_slo_ms: 0 });
    const res = defaultResources(cfg);
    await fleet(res.index);
    const router = createRouter(cfg, res, { clock: () => NOW });
    for (const u of ['one', 'two', 'three', 'four']) {
      const o = await router.route(body(u));
      expect(o.flightId).toBeNull();
      expect(o.shed).toBeNull();
      expect(o.decision.candidates.every((c) => c.withinItl && c.predictedItlMs === null)).toBe(true);
    }
  });
  it("uses each pod's decode step as the collector measured it, unless told not to", async () => {
    // Configured as a fast GPU (1 ms steps); the collector measured 150 ms steps on every pod, over the bound.
    const measured: Partial<PodState> = {
      decodeSteps: {
        contextTokens: 50_000,
        stepMs: 150,
        intervals: 40,
        line: { baseMs: 150, msPerContextToken: 0 },
      },
    };
    const routeFour = async (fromMetrics: boolean) => {
      const cfg = config({ itl_decode_base_ms: 1, itl_decode_from_metrics: fromMetrics });
      const res = defaultResources(cfg);
      await fleet(res.index, measured);
      const router = createRouter(cfg, res, { clock: () => NOW });
      for (const u of ['one', 'two', 'three']) await router.route(body(u, 256));
      return router.route(body('four', 256));
    };
    const guarded = await routeFour(true);
    // The running context alone breaks the bound: retry after an answer's span (256 tokens × 100 ms).
    expect(guarded.shed).toEqual({ status: 429, retryAfterS: 26 });
    for (const c of guarded.decision.candidates) {
      expect(c.predictedItlMs).toBeGreaterThan(150);
      expect(c.reasons.join(' ')).toMatch(/\(decode step model measured on the pod\)/);
    }
    const configured = await routeFour(false);
    expect(configured.shed).toBeNull();
    expect(configured.decision.chosen?.withinItl).toBe(true);
  });
});
