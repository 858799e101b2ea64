import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { PodStatePatch } from '../../../src/index/index.js';
import { closeDecisionPool, runningDecisionPool } from '../../../src/router/decision-pool.js';
import { createRouter, defaultResources, resourcesSettled, type Router } from '../../../src/router/index.js';
import type { PromptTokenizer } from '../../../src/tokenize/types.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

/**
 * The context window from the pods (issue #37, item 2) with the real Qwen3 template and tokenizer: with no
 * max_model_len in the config, the router takes the smallest max_model_len the model's healthy pods report
 * in their state (the collector reads it from /v1/models), checks a prompt prepared before it knew it right
 * after the lookup, and cuts every later prompt's tokenization at it, on its own thread or in a decision
 * worker. The config's max_model_len wins over the pods'.
 */

const MODEL = 'qwen3';
let routers: Router[] = [];
afterEach(async () => {
  await Promise.all(routers.map((r) => r.close()));
  routers = [];
});
afterAll(() => closeDecisionPool());

/** The largest token count a tokenization was asked for, per call (the real tokenizer underneath). */
function recording(get: () => PromptTokenizer, cuts: number[]): () => PromptTokenizer {
  return () => {
    const t = get();
    return {
      tokenizer: t.tokenizer,
      tokenize: (text, maxTokens) => {
        cuts.push(maxTokens);
        return t.tokenize(text, maxTokens);
      },
    };
  };
}

async function routerFor(
  over: Record<string, unknown>,
  pods: Record<string, PodStatePatch>,
  opts: { background?: boolean; cuts?: number[] } = {},
): Promise<Router> {
  const cfg = qwen3RouterConfig({ decision_workers: 0, stale_after_ms: 3_600_000, ...over });
  const res = defaultResources(cfg, { background: opts.background ?? false });
  const now = Date.now();
  let i = 1;
  for (const [podId, patch] of Object.entries(pods))
    await res.index.upsertPodState(
      { model: MODEL, podId },
      { address: `10.0.0.${i++}:8000`, lastScrapeAtMs: now, lastEventAtMs: now, ...patch },
    );
  if (opts.background) await resourcesSettled(cfg);
  const router = createRouter(
    cfg,
    opts.cuts ? { ...res, promptTokenizer: recording(res.promptTokenizer, opts.cuts) } : res,
  );
  routers.push(router);
  return router;
}

const body = (content: string): string =>
  JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }] });
const SHORT = body('hello there');
const LONG = body('word '.repeat(5000));

describe("the context window from the pods' max_model_len", () => {
  it('checks a prompt prepared before the first lookup, then cuts tokenization at the window', async () => {
    const cuts: number[] = [];
    const router = await routerFor({}, { p: { maxModelLen: 64 } }, { cuts });
    const first = await router.route(LONG);
    expect(first.fallbackReason).toBe('context_window_exceeded');
    expect(first.fallbackDetail).toContain("max_model_len of qwen3 (its pods' /v1/models)");
    expect(first.promptTokens).toBe(64);
    expect(first.target?.podId).toBe('p');
    // Before the first lookup, the cut is max_prompt_tokens.
    expect(cuts).toEqual([131_072]);

    expect((await router.route(SHORT)).fallbackReason).toBeNull();
    const later = await router.route(LONG);
    expect(later.fallbackReason).toBe('context_window_exceeded');
    expect(later.fallbackDetail).toBe('prompt over 64 tokens, max_model_len of qwen3');
    expect(later.promptTokens).toBe(64);
    // Tokenized up to the window only.
    expect(cuts.slice(1)).toEqual([64, 64]);
  });

  it("takes the smallest window of the model's healthy pods", async () => {
    const cuts: number[] = [];
    const router = await routerFor(
      {},
      {
        a: { maxModelLen: 4096 },
        b: { maxModelLen: 2048 },
        c: { maxModelLen: 32, healthy: false },
        d: { maxModelLen: 0 },
      },
      { cuts },
    );
    expect((await router.route(SHORT)).fallbackReason).toBeNull();
    expect((await router.route(SHORT)).fallbackReason).toBeNull();
    expect(cuts).toEqual([131_072, 2048]);
  });

  it("lets the config's max_model_len win over the pods'", async () => {
    const cuts: number[] = [];
    const router = await routerFor(
      { max_model_len: { [MODEL]: 1000 } },
      { p: { maxModelLen: 64 } },
      { cuts },
    );
    const mid = body('word '.repeat(200));
    const a = await router.route(mid);
    const b = await router.route(mid);
    expect([a.fallbackReason, b.fallbackReason]).toEqual([null, null]);
    expect(a.promptTokens).toBeGreaterThan(64);
    expect(cuts).toEqual([1000, 1000]);
  });

  it('leaves the cut at max_prompt_tokens when the pods report no window', async () => {
    const cuts: number[] = [];
    const router = await routerFor({ max_prompt_tokens: 4096 }, { p: {} }, { cuts });
    await router.route(SHORT);
    const long = await router.route(LONG);
    expect(long.fallbackReason).toBe('prompt_truncated');
    expect(cuts).toEqual([4096, 4096]);
  });

  it('cuts at the learned window in a decision worker too', async () => {
    const router = await routerFor(
      { decision_workers: 1, decision_budget_ms: 5000 },
      { p: { maxModelLen: 64 } },
      { background: true },
    );
    expect((await router.route(SHORT)).fallbackReason).toBeNull();
    const long = await router.route(LONG);
    // The worker's own detail: it cut the prompt at the window (the router's check after a lookup says more).
    expect(long.fallbackReason).toBe('context_window_exceeded');
    expect(long.fallbackDetail).toBe('prompt over 64 tokens, max_model_len of qwen3');
    expect(long.promptTokens).toBe(64);
    const stats = await runningDecisionPool()!.stats();
    expect(stats.reduce((n, s) => n + s.prepared, 0)).toBe(2);
  }, 120_000);
});
