import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeStepMs,
  itlVerdict,
  itlWithStall,
  measuredItlModel,
  type ItlGuardInput,
  type ItlModel,
} from '../../../src/core/itl-guard.js';

const model: ItlModel = { decodeBaseMs: 40, decodeMsPerContextToken: 0.001, boundMs: 100 };

/** A pod decoding 10,000 context tokens (step 40 + 10 + the candidate's 2,000 = 52 ms), answers of 100 tokens. */
function input(over: Partial<ItlGuardInput> = {}): ItlGuardInput {
  return {
    model,
    work: [],
    runningContextTokens: 10_000,
    responseTokens: 100,
    kvFreeTokens: null,
    nowMs: 100_000,
    promptTokens: 2_000,
    uncachedTokens: 2_000,
    prefillMs: 1_000,
    prefillSteps: 1,
    ...over,
  };
}

describe('ITL guard (core/itl-guard.ts)', () => {
  it('decode step grows with the context the pod decodes', () => {
    expect(decodeStepMs(model, 0)).toBe(40);
    expect(decodeStepMs(model, 12_000)).toBe(52);
    expect(decodeStepMs(model, -5)).toBe(40);
  });

  it('ITL = d·W/(W − S): a stall of half the span doubles it; a full span is unbounded', () => {
    expect(itlWithStall(50, 10_000, 0)).toBe(50);
    expect(itlWithStall(50, 10_000, 5_000)).toBe(100);
    expect(itlWithStall(50, 10_000, 10_000)).toBe(Number.POSITIVE_INFINITY);
  });

  it('admits while the stall within the last span keeps the ITL within the bound (hand-computed)', () => {
    // span W = 100 tokens × 100 ms = 10 s; step 52 ms; this request stalls 1,000 − 1·52 = 948 ms.
    // Budget: 52·10,000/(10,000 − S) ≤ 100 ⇔ S ≤ 4,800 ms.
    const v = itlVerdict(input({ work: [{ atMs: 95_000, stallMs: 3_000 }] }));
    expect(v.stallMs).toBe(948);
    expect(v.predictedItlMs).toBeCloseTo((52 * 10_000) / (10_000 - 3_948), 9);
    expect(v).toMatchObject({ ok: true, reason: null, retryAfterMs: 0 });
    // 4,000 ms already given: 4,948 > 4,800.
    const over = itlVerdict(input({ work: [{ atMs: 95_000, stallMs: 4_000 }] }));
    expect(over).toMatchObject({ ok: false, reason: 'itl' });
    expect(over.predictedItlMs).toBeGreaterThan(100);
    // Retry once that stall has left the span: at 95,000 + 10,000.
    expect(over.retryAfterMs).toBe(5_000);
  });

  it('ignores work older than one span, and retries after the oldest entries that must leave', () => {
    const old = { atMs: 100_000 - 10_000, stallMs: 9_000 }; // exactly one span ago: out
    expect(itlVerdict(input({ work: [old] })).ok).toBe(true);
    const v = itlVerdict(
      input({
        work: [
          { atMs: 89_000, stallMs: 9_000 }, // before the span
          { atMs: 92_000, stallMs: 2_500 },
          { atMs: 94_000, stallMs: 2_000 },
          { atMs: 99_000, stallMs: 500 },
        ],
      }),
    );
    // 5,000 + 948 > 4,800; without the oldest (2,500 at 92 s): 3,448 fits → retry at 102 s.
    expect(v).toMatchObject({ ok: false, retryAfterMs: 2_000 });
  });

  it('refuses when the running context alone breaks the bound, retrying after a span', () => {
    const v = itlVerdict(input({ runningContextTokens: 60_000 })); // step 102 ms
    expect(v).toMatchObject({ ok: false, reason: 'itl', retryAfterMs: 10_000 });
  });

  it('refuses when the KV cache cannot hold the new tokens, whatever the ITL', () => {
    expect(itlVerdict(input({ kvFreeTokens: 1_999 }))).toMatchObject({ ok: false, reason: 'kv' });
    expect(itlVerdict(input({ kvFreeTokens: 2_000 })).ok).toBe(true);
    expect(itlVerdict(input({ kvFreeTokens: null })).ok).toBe(true);
  });

  it('an idle pod takes any request (no pod may be closed to every prompt)', () => {
    const v = itlVerdict(input({ runningContextTokens: 0, prefillMs: 1e9, kvFreeTokens: 0 }));
    expect(v.ok).toBe(true);
    expect(v.predictedItlMs).toBe(Number.POSITIVE_INFINITY);
  });

  it('property: more stall already given never turns a refusal into an admission', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ age: fc.nat({ max: 20_000 }), stallMs: fc.nat({ max: 5_000 }) }), {
          maxLength: 8,
        }),
        fc.nat({ max: 5_000 }),
        fc.nat({ max: 50_000 }),
        (entries, extra, context) => {
          const work = entries
            .map((e) => ({ atMs: 100_000 - e.age, stallMs: e.stallMs }))
            .sort((a, b) => a.atMs - b.atMs);
          const base = itlVerdict(input({ work, runningContextTokens: context }));
          const more = itlVerdict(
            input({ work: [...work, { atMs: 100_000, stallMs: extra }], runningContextTokens: context }),
          );
          if (!base.ok) expect(more.ok).toBe(false);
          expect(more.predictedItlMs).toBeGreaterThanOrEqual(base.predictedItlMs);
        },
      ),
    );
  });
  it('property: more running context never lowers the predicted ITL nor turns a refusal into an admission', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 80_000 }),
        fc.nat({ max: 80_000 }),
        fc.nat({ max: 4_000 }),
        (c1, c2, stall) => {
          const work = [{ atMs: 99_000, stallMs: stall }];
          const lo = itlVerdict(input({ work, runningContextTokens: Math.min(c1, c2) }));
          const hi = itlVerdict(input({ work, runningContextTokens: Math.max(c1, c2) }));
          expect(hi.predictedItlMs).toBeGreaterThanOrEqual(lo.predictedItlMs);
          if (!lo.ok) expect(hi.ok).toBe(false);
        },
      ),
    );
  });

  it('takes the decode line the collector measured, or scales the configured one through its one step', () => {
    const steps = { contextTokens: 100_000, stepMs: 70, intervals: 40 };
    expect(measuredItlModel(model, null)).toBe(model);
    expect(measuredItlModel(model, { ...steps, line: { baseMs: 13, msPerContextToken: 0.0001 } })).toEqual({
      decodeBaseMs: 13,
      decodeMsPerContextToken: 0.0001,
      boundMs: 100,
    });
    // Configured: 40 + 0.001 × 100,000 = 140 ms there; measured 70 ms: both terms halve.
    const scaled = measuredItlModel(model, { ...steps, line: null });
    expect(scaled.decodeBaseMs).toBeCloseTo(20, 12);
    expect(scaled.decodeMsPerContextToken).toBeCloseTo(0.0005, 12);
    expect(scaled.boundMs).toBe(100);
    expect(measuredItlModel(model, { ...steps, stepMs: 0, line: null })).toBe(model);
    // A record damaged in the index never makes the guard refuse everything.
    const bad = [NaN, -1, Infinity, '12', null] as unknown as number[];
    for (const v of bad) {
      expect(measuredItlModel(model, { ...steps, stepMs: v, line: null })).toBe(model);
      expect(
        measuredItlModel(model, { ...steps, stepMs: v, line: { baseMs: v, msPerContextToken: 0.1 } }),
      ).toBe(model);
    }
    expect(measuredItlModel(model, null as never)).toBe(model);
  });
});
