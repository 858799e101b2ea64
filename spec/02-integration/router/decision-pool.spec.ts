import { afterAll, describe, expect, it } from 'vitest';
import {
  affinityOf,
  closeDecisionPool,
  modelOf,
  runningDecisionPool,
} from '../../../src/router/decision-pool.js';
import { SAME_BODY_MIN_BYTES, sameBodyStats } from '../../../src/router/same-body-memo.js';
import { createRouter, defaultResources, resourcesSettled, type Router } from '../../../src/router/index.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

/**
 * The decision workers (issue #37, items 1 and 4) with the real Qwen3 template and tokenizer: a request
 * prepared in a worker routes as one prepared on the event loop; a request past its budget, or whose worker
 * is killed under traffic, is routed on load (named reason, never an error), and the worker is replaced.
 */

const MODEL = 'qwen3';
const routers: Router[] = [];
afterAll(async () => {
  await Promise.all(routers.map((r) => r.close()));
  await closeDecisionPool();
});

async function routerFor(over: Record<string, unknown>, background: boolean): Promise<Router> {
  const cfg = qwen3RouterConfig({ stale_after_ms: 3_600_000, ...over });
  const res = defaultResources(cfg, { background });
  const now = Date.now();
  await res.index.upsertPodState(
    { model: MODEL, podId: 'p' },
    { address: '10.0.0.1:8000', lastScrapeAtMs: now, lastEventAtMs: now },
  );
  if (background) await resourcesSettled(cfg);
  const router = createRouter(cfg, res);
  routers.push(router);
  return router;
}

const body = (system: string, user: string): string =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
  });

describe('decision workers', () => {
  it('read the model and an affinity from the raw body without parsing it', () => {
    expect(modelOf('{"messages":[{"role":"user","content":"\\"model\\": \\"x\\""}],"model" : "m-1"}')).toBe(
      'm-1',
    );
    expect(modelOf('{"x":{"model":"inner"}}')).toBeNull();
    const a = affinityOf(body('You are a helpful assistant.', 'one'));
    expect(affinityOf(Buffer.from(body('You are a helpful assistant.', 'one')))).toBe(a);
    expect(affinityOf(body('Another system prompt entirely.', 'one'))).not.toBe(a);
  });

  it('prepare a request as the event loop does, then fail open on a budget and a killed worker', async () => {
    const inline = await routerFor({ decision_workers: 0 }, false);
    const pooled = await routerFor({ decision_workers: 2, decision_budget_ms: 2000 }, true);
    const pool = runningDecisionPool();
    expect(pool?.size).toBe(2);

    const b = body('You are a terse assistant. '.repeat(50), 'What is a KV cache?');
    const [a, w] = [await inline.route(b), await pooled.route(b)];
    expect(w.fallbackReason).toBeNull();
    expect(w.promptTokens).toBe(a.promptTokens);
    expect(w.blocks).toBe(a.blocks);
    expect(w.target?.podId).toBe('p');
    const stats = await pool!.stats();
    expect(stats.reduce((n, s) => n + s.prepared, 0)).toBe(1);
    // Each worker reports its own heap (its own V8 isolate, holding the Qwen3 tokenizer): the soak samples it.
    for (const s of stats) expect(s.heapUsedBytes ?? 0, `worker ${s.worker}`).toBeGreaterThan(4 << 20);

    // Killed under traffic: every request is answered, on load when its worker died, never an error.
    const sent = Array.from({ length: 40 }, (_, i) =>
      pooled.route(body(`system ${i % 4} `.repeat(200), `q${i}`)),
    );
    await pool!.killWorker(0);
    const outs = await Promise.all(sent);
    for (const o of outs) {
      expect(o.target?.podId).toBe('p');
      // On a loaded host the 40 queued behind the kill may also run past decision_budget_ms: on load too.
      expect([null, 'decision_worker_failed', 'tokenizer_loading', 'decision_budget_exceeded']).toContain(
        o.fallbackReason,
      );
    }
    expect(outs.filter((o) => o.fallbackReason === 'decision_worker_failed').length).toBeGreaterThan(0);
    await expect.poll(async () => (await pool!.stats())[0]!.restarts, { timeout: 30_000 }).toBe(1);
    // Replaced and loaded again: requests are prepared in workers again.
    await resourcesSettled(
      qwen3RouterConfig({ stale_after_ms: 3_600_000, decision_workers: 2, decision_budget_ms: 2000 }),
    );
    expect((await pooled.route(b)).fallbackReason).toBeNull();
  }, 120_000);

  it('answers the very same long body again without a worker, and a different one of its length with one', async () => {
    const pooled = await routerFor({ decision_workers: 2, decision_budget_ms: 5000 }, true);
    const pool = runningDecisionPool()!;
    const prepared = async (): Promise<number> => (await pool.stats()).reduce((n, s) => n + s.prepared, 0);
    // ~160 KiB: over SAME_BODY_MIN_BYTES, a long job for the pool.
    const long = body('Project notes, line after line. '.repeat(5_000), 'Summarize them.');
    expect(Buffer.byteLength(long)).toBeGreaterThan(SAME_BODY_MIN_BYTES);
    const first = await pooled.route(Buffer.from(long));
    expect(first.fallbackReason).toBeNull();
    const before = await prepared();
    const hits = sameBodyStats().hits;
    const again = await pooled.route(Buffer.from(long));
    expect(await prepared()).toBe(before);
    // The state dump's count (routers.sameBody) sees it.
    expect(sameBodyStats().hits).toBe(hits + 1);
    expect(sameBodyStats().bytes).toBeGreaterThan(SAME_BODY_MIN_BYTES);
    expect(again.fallbackReason).toBeNull();
    expect(again.promptTokens).toBe(first.promptTokens);
    expect(again.blocks).toBe(first.blocks);
    expect(again.timings.templateMs).toBe(0);
    expect(again.timings.tokenizeMs).toBe(0);
    // The same length, one byte different: a worker prepares it.
    const other = long.replace('Summarize them.', 'Summarize them!');
    expect(other.length).toBe(long.length);
    await pooled.route(Buffer.from(other));
    expect(await prepared()).toBe(before + 1);
  }, 60_000);

  it('stops waiting at decision_budget_ms and routes on load among the model pods', async () => {
    const slow = await routerFor(
      { decision_workers: 2, decision_budget_ms: 10, max_template_messages: 100_000 },
      true,
    );
    const many = JSON.stringify({
      model: MODEL,
      messages: Array.from({ length: 20_000 }, (_, i) => ({
        role: i % 2 ? 'assistant' : 'user',
        content: `t${i}`,
      })),
    });
    const t = performance.now();
    const out = await slow.route(many);
    expect(performance.now() - t).toBeLessThan(1000);
    expect(out.fallbackReason).toBe('decision_budget_exceeded');
    expect(out.model).toBe(MODEL);
    expect(out.target?.podId).toBe('p');
  }, 60_000);
});
