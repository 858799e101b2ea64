import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../../bench/lib/rng.js';
import { bootstrapQuantileChange, bootstrapRateRatio } from '../../../bench/lib/stats/bootstrap.js';
import { goodputPerMin, meetsSlo } from '../../../bench/lib/stats/goodput.js';
import {
  erroredInWindow,
  inMeasureWindow,
  requestMetrics,
  summarizeRequests,
} from '../../../bench/lib/stats/metrics.js';
import { percentile, summarize, weightedPercentile } from '../../../bench/lib/stats/percentile.js';
import type { RequestRecord } from '../../../bench/lib/types.js';

function rec(
  p: Partial<RequestRecord> & { startMs: number; ttft: number; out?: number; itl?: number },
): RequestRecord {
  const out = p.out ?? 11;
  const first = p.startMs + p.ttft;
  const last = first + (out - 1) * (p.itl ?? 10);
  return {
    key: p.key ?? `k${p.startMs}`,
    conversationId: 'c',
    turnIndex: 0,
    cluster: p.cluster ?? p.key ?? `k${p.startMs}`,
    pod: 'pod-0',
    status: p.status ?? 'successful',
    startMs: p.startMs,
    firstTokenMs: first,
    lastTokenMs: last,
    endMs: last + 1,
    promptTokens: 100,
    outputTokens: out,
    cachedTokens: 0,
  };
}

describe('nearest-rank percentiles (GuideLLM rule)', () => {
  it('takes a sample value, never interpolating (the lower middle of 4)', () => {
    expect(percentile([4, 1, 3, 2], 0.5)).toBe(2);
    expect(percentile([1, 2, 3], 0.5)).toBe(2);
    expect(
      percentile(
        Array.from({ length: 100 }, (_, i) => i + 1),
        0.95,
      ),
    ).toBe(95);
    expect(percentile([7], 0.999)).toBe(7);
    expect(Number.isNaN(percentile([], 0.5))).toBe(true);
  });

  it("reproduces GuideLLM's float running sum: where q·n is whole, the cdf can fall a hair short of q", () => {
    // Values from numpy: np.cumsum(np.ones(n)/n), then searchsorted(cdf, q, side="left").
    const ranks = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
    expect(percentile(ranks(12), 0.5)).toBe(7); // 6 × (1/12) sums to 0.49999999999999994
    expect(percentile(ranks(194), 0.5)).toBe(98);
    expect(percentile(ranks(240), 0.95)).toBe(229);
    expect(percentile(ranks(10), 0.9)).toBe(10);
    expect(percentile(ranks(200), 0.5)).toBe(100); // here the sum is exact: the lower middle
    // Equal values merge before the sum (np.unique), which changes the running sum.
    expect(percentile([...ranks(5), ...ranks(5), 6, 7], 0.5)).toBe(3);
    // Weighted as GuideLLM weights ITL: 12 requests with 255 decode intervals each.
    expect(
      weightedPercentile(
        ranks(12).map((value) => ({ value, weight: 255 })),
        0.5,
      ),
    ).toBe(7);
    expect(summarize(ranks(12)).median).toBe(7);
  });

  it('weights move the percentile to where the cumulative weight reaches q', () => {
    expect(
      weightedPercentile(
        [
          { value: 1, weight: 1 },
          { value: 10, weight: 3 },
        ],
        0.5,
      ),
    ).toBe(10);
    expect(
      weightedPercentile(
        [
          { value: 1, weight: 3 },
          { value: 10, weight: 1 },
        ],
        0.5,
      ),
    ).toBe(1);
    // Equal weights reproduce the unweighted rule.
    expect(
      weightedPercentile(
        [4, 1, 3, 2].map((value) => ({ value, weight: 5 })),
        0.5,
      ),
    ).toBe(2);
  });

  it('is a member of the sample and monotone in q', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 60 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (xs, a, b) => {
          const [lo, hi] = a <= b ? [a, b] : [b, a];
          const pl = percentile(xs, lo);
          expect(xs).toContain(pl);
          expect(pl).toBeLessThanOrEqual(percentile(xs, hi));
        },
      ),
    );
  });

  it('summaries carry GuideLLM fields', () => {
    const s = summarize([1, 2, 3, 4]);
    expect(s).toMatchObject({ count: 4, mean: 2.5, median: 2, min: 1, max: 4, total_sum: 10 });
    expect(s.percentiles.p99).toBe(4);
  });
});

describe('GuideLLM request metrics', () => {
  it('computes TTFT, ITL (excluding the first token), TPOT (including TTFT) and E2E', () => {
    const r = rec({ startMs: 1000, ttft: 500, out: 11, itl: 20 });
    expect(requestMetrics(r)).toEqual({ ttftMs: 500, itlMs: 20, tpotMs: (500 + 200) / 11, e2eMs: 701 });
    expect(requestMetrics(rec({ startMs: 0, ttft: 5, out: 1 }))!.itlMs).toBeNull();
    expect(requestMetrics({ ...r, status: 'incomplete' })).toBeNull();
  });

  it('counts a request when it overlaps the measure window', () => {
    const r = rec({ startMs: 50, ttft: 20 });
    expect(inMeasureWindow(r, 60, 300)).toBe(true); // started before, ended inside
    expect(inMeasureWindow(rec({ startMs: 300, ttft: 5 }), 60, 300)).toBe(true);
    expect(inMeasureWindow(rec({ startMs: 301, ttft: 5 }), 60, 300)).toBe(false);
    expect(inMeasureWindow(rec({ startMs: 0, ttft: 5, out: 2 }), 60, 300)).toBe(false);
    // Errored requests by the same overlap rule (GuideLLM filters its errored list the same way).
    const failed = (startMs: number, endMs: number): RequestRecord => ({
      ...rec({ startMs, ttft: 1 }),
      status: 'errored',
      firstTokenMs: null,
      lastTokenMs: null,
      endMs,
    });
    const errs = [failed(40, 70), failed(50, 55), failed(300, 301), failed(301, 302)];
    expect(erroredInWindow(errs, 60, 300).map((r) => r.startMs)).toEqual([40, 300]);
  });

  it('weights ITL by output_tokens − 1', () => {
    const s = summarizeRequests([
      rec({ startMs: 0, ttft: 1, out: 2, itl: 100 }),
      rec({ startMs: 1, ttft: 1, out: 101, itl: 10 }),
    ]);
    expect(s.itl_ms.median).toBe(10);
  });

  it('goodput counts SLO-meeting completions inside the window, per minute', () => {
    const slo = { ttftMs: 100, itlMs: 50, basis: 'test' };
    const recs = [
      rec({ startMs: 0, ttft: 50, out: 2 }), // ends at 61: inside [60, 120060]
      rec({ startMs: 1000, ttft: 150 }), // TTFT too slow
      rec({ startMs: 2000, ttft: 10, itl: 60 }), // ITL too slow
      rec({ startMs: 200_000, ttft: 10 }), // ends after the window
    ];
    expect(meetsSlo(recs[0]!, slo)).toBe(true);
    expect(goodputPerMin(recs, slo, 60, 120_060)).toBe(0.5);
  });
});

describe('paired hierarchical bootstrap', () => {
  const run = (shift: number, n: number, seed: number): RequestRecord[] =>
    Array.from({ length: n }, (_, i) =>
      rec({ startMs: i, key: `r${i}`, ttft: 1000 + ((i * 7919 + seed) % 997) + shift }),
    );

  it('finds no change between identical arms and a clear change when there is one', () => {
    const A = [run(0, 200, 1), run(0, 200, 2)];
    const same = bootstrapQuantileChange(A, A, (r) => requestMetrics(r)!.ttftMs, [0.5, 0.95], {
      resamples: 300,
      seed: 1,
      paired: true,
    });
    for (const q of same) {
      expect(q.change).toBe(0);
      expect(q.ci95[0]).toBeLessThanOrEqual(0);
      expect(q.ci95[1]).toBeGreaterThanOrEqual(0);
    }
    const B = [run(-500, 200, 1), run(-500, 200, 2)];
    const [m] = bootstrapQuantileChange(A, B, (r) => requestMetrics(r)!.ttftMs, [0.5], {
      resamples: 300,
      seed: 1,
      paired: true,
    });
    expect(m!.change).toBeLessThan(-0.2);
    expect(m!.ci95[1]).toBeLessThan(0);
    expect(m!.pNotBetter).toBe(0);
  });

  it('is reproducible for a seed and works unpaired', () => {
    const A = [run(0, 50, 3)];
    const B = [run(-100, 60, 4)];
    const opts = { resamples: 200, seed: 9, paired: false };
    const a = bootstrapQuantileChange(A, B, (r) => requestMetrics(r)!.ttftMs, [0.5], opts);
    const b = bootstrapQuantileChange(A, B, (r) => requestMetrics(r)!.ttftMs, [0.5], opts);
    expect(a).toEqual(b);
  });

  it('estimates rate ratios with a CI around the point estimate', () => {
    const base = [Array.from({ length: 100 }, (_, i) => i % 4 === 0)];
    const treat = [Array.from({ length: 100 }, (_, i) => i % 2 === 0)];
    const r = bootstrapRateRatio(base, treat, 1, { resamples: 500, seed: 1 });
    expect(r.ratio).toBe(2);
    expect(r.ci95[0]!).toBeLessThan(2);
    expect(r.ci95[1]!).toBeGreaterThan(2);
    const zero = bootstrapRateRatio([[false]], [[true]], 1, { resamples: 10, seed: 1 });
    expect(zero.ratio).toBeNull();
    expect(zero.ci95).toEqual([null, null]);
  });

  it('does not collapse the goodput CI to a point when every run completed the same all-meeting count', () => {
    // The count of completions is random too: a fixed-n resample of all-true indicators gave [1.03, 1.03].
    const runs = (n: number): boolean[][] => [0, 1, 2].map(() => Array.from({ length: n }, () => true));
    const r = bootstrapRateRatio(runs(30), runs(31), 1, { resamples: 2000, seed: 42 });
    expect(r.ratio).toBeCloseTo(31 / 30, 12);
    expect(r.ci95[0]!).toBeLessThan(r.ratio!);
    expect(r.ci95[1]!).toBeGreaterThan(r.ratio!);
    // Poisson counts of 90 vs 93: the log ratio's sd is √(1/90 + 1/93) ≈ 0.15, so roughly [0.77, 1.38].
    expect(r.ci95[0]!).toBeGreaterThan(0.65);
    expect(r.ci95[0]!).toBeLessThan(0.9);
    expect(r.ci95[1]!).toBeGreaterThan(1.2);
    expect(r.ci95[1]!).toBeLessThan(1.6);
  });
});

describe('Rng.poisson', () => {
  it('is 0 for mean 0 and rejects a negative or non-finite mean', () => {
    const rng = new Rng(7);
    for (let i = 0; i < 100; i++) expect(rng.poisson(0)).toBe(0);
    expect(() => rng.poisson(-1)).toThrow(RangeError);
    expect(() => rng.poisson(Number.NaN)).toThrow(RangeError);
    expect(() => rng.poisson(Number.POSITIVE_INFINITY)).toThrow(RangeError);
  });

  it.each([0.5, 1, 7, 45, 300])('has mean and variance equal to the mean (%s)', (mean) => {
    const rng = Rng.derive(11, 'poisson', mean);
    const n = 20_000;
    let sum = 0;
    let sumSq = 0;
    let allCounts = true;
    for (let i = 0; i < n; i++) {
      const x = rng.poisson(mean);
      allCounts &&= Number.isInteger(x) && x >= 0;
      sum += x;
      sumSq += x * x;
    }
    expect(allCounts).toBe(true);
    const m = sum / n;
    const v = (sumSq - n * m * m) / (n - 1);
    // Five standard errors: the mean's is √(λ/n), the sample variance's ≈ √((λ + 2λ²)/n).
    expect(Math.abs(m - mean)).toBeLessThan(5 * Math.sqrt(mean / n));
    expect(Math.abs(v - mean)).toBeLessThan(5 * Math.sqrt((mean + 2 * mean * mean) / n));
  });

  it('matches the Poisson probabilities across a chunk boundary (mean 31)', () => {
    // 31 is drawn as 30 + 1: a wrong split or a normal approximation shows in the pmf, not only the moments.
    const rng = new Rng(5);
    const n = 50_000;
    const hist = new Map<number, number>();
    for (let i = 0; i < n; i++) {
      const x = rng.poisson(31);
      hist.set(x, (hist.get(x) ?? 0) + 1);
    }
    let logPmf = -31; // log P(X = 0)
    for (let k = 0; k <= 60; k++) {
      if (k > 0) logPmf += Math.log(31 / k);
      const p = Math.exp(logPmf);
      const seen = (hist.get(k) ?? 0) / n;
      expect(Math.abs(seen - p)).toBeLessThan(5 * Math.sqrt((p * (1 - p)) / n) + 1e-4);
    }
  });
});
