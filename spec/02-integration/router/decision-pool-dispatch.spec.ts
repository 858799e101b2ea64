import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareSettings } from '../../../src/router/decision-pool.js';
import { DecisionPool } from '../../../src/tokenize/off-thread/pool.js';
import type { PrepareSettings } from '../../../src/tokenize/off-thread/protocol.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';

/**
 * How the decision pool hands requests to its workers (issue #37, head of line), with real workers and the
 * Qwen3 tokenizer: a small request never waits behind long jobs while a worker could take it, long jobs never
 * hold every worker, affinity picks the worker when it is idle, byte bodies cross in a reused shared buffer,
 * and a call still waiting at its budget is answered decision_budget_exceeded without being sent.
 */

const KEY = 'dispatch';
const settings: PrepareSettings = prepareSettings(
  qwen3RouterConfig({ decision_workers: 2, decision_budget_ms: 30_000 }),
  2,
);
const pools: DecisionPool[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
});

async function poolOf(size: number): Promise<DecisionPool> {
  const p = new DecisionPool(size);
  pools.push(p);
  await p.warm(KEY, settings);
  return p;
}

/** About `bytes` of text no cache has seen (tag), in a chat body. */
function body(tag: string, bytes: number): string {
  const words: string[] = [];
  let n = 0;
  for (let i = 0; n < bytes; i++) {
    const w = `${tag}${(i * 7919) % 10007} ${['river', 'stone', 'ledger', 'orbit', 'candle'][i % 5]}`;
    words.push(w);
    n += w.length + 1;
  }
  return JSON.stringify({ model: 'qwen3', messages: [{ role: 'user', content: words.join(' ') }] });
}

let two: DecisionPool;
beforeAll(async () => {
  two = await poolOf(2);
}, 120_000);

describe('decision pool dispatch', () => {
  it('sends a small request to the free worker while long jobs wait for one worker', async () => {
    const order: string[] = [];
    const track = (label: string, p: Promise<unknown> | null): Promise<unknown> => {
      expect(p).not.toBeNull();
      return p!.then((r) => {
        order.push(label);
        return r;
      });
    };
    // Two fresh ~400 KB contexts whose affinities pick both workers, then a small request behind them.
    const a = track('long a', two.prepare(KEY, settings, body('a', 400_000), 0));
    const b = track('long b', two.prepare(KEY, settings, body('b', 400_000), 1));
    const small = track('small', two.prepare(KEY, settings, body('s', 2_000), 0));
    expect(two.queued).toBe(1); // long b waits: long a holds one worker, the other stays free
    const results = await Promise.all([a, b, small]);
    for (const r of results) expect(r).toMatchObject({ ok: true });
    expect(order).toEqual(['small', 'long a', 'long b']);
    const stats = await two.stats();
    expect(stats.map((s) => s.long)).toEqual([1, 1]);
  }, 60_000);

  it('prefers the affinity worker when it is idle', async () => {
    const before = (await two.stats()).map((s) => s.prepared);
    for (let i = 0; i < 3; i++) await two.prepare(KEY, settings, body('same', 3_000), 1);
    const after = (await two.stats()).map((s) => s.prepared);
    expect([after[0]! - before[0]!, after[1]! - before[1]!]).toEqual([0, 3]);
  }, 60_000);

  it("reads byte bodies through the worker's reused buffer as it reads strings", async () => {
    const long = body('bytes-long', 200_000);
    const short = body('bytes-short', 3_000);
    const keysOf = async (b: Uint8Array | string): Promise<unknown> => {
      const r = await two.prepare(KEY, settings, b, 0);
      expect(r).toMatchObject({ ok: true });
      return (r as { keys: string[]; promptTokens: number }).keys;
    };
    // The long body grows the buffer; the short one after it leaves stale bytes past its length.
    const fromBytes = [await keysOf(Buffer.from(long)), await keysOf(Buffer.from(short))];
    expect(fromBytes).toEqual([await keysOf(long), await keysOf(short)]);
  }, 60_000);

  it('answers a call still waiting at its budget without sending it', async () => {
    const one = await poolOf(1);
    const held = one.prepare(KEY, settings, body('held', 400_000), 0);
    const late = await one.prepare(KEY, { ...settings, budgetMs: 1 }, body('late', 2_000), 0);
    expect(late).toMatchObject({ ok: false, reason: 'decision_budget_exceeded' });
    expect((late as { detail: string }).detail).toMatch(/no decision worker free/);
    expect(await held).toMatchObject({ ok: true });
    expect((await one.stats())[0]!.prepared).toBe(1);
  }, 120_000);
});
