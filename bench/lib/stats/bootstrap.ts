// Paired hierarchical bootstrap (runs, then clusters) for CIs on arm-vs-arm changes.
import { Rng } from '../rng.js';
import type { RequestRecord } from '../types.js';
import { nearestRankSorted, percentileSorted } from './percentile.js';

/**
 * Paired hierarchical bootstrap (bench.md §5). Level 1 resamples runs (trials), level 2 resamples clusters
 * inside each chosen run (prefix group, conversation, or single request). Paired: the SAME cluster draws
 * feed both arms, which is valid for open-loop runs where both arms saw identical prompts and arrival times.
 * Unpaired (closed loop, where arms complete different request sets): runs are still paired, clusters are
 * resampled for each arm separately. The estimand is the relative change of a percentile,
 * q(treatment)/q(baseline) − 1; the CI is the percentile interval of the resampled changes.
 */

export interface QuantileChange {
  q: number;
  baseline: number;
  treatment: number;
  /** treatment/baseline − 1 (−0.95 is "−95%"). */
  change: number;
  ci95: [number, number];
  /** Share of resamples where the treatment was not better (change ≥ 0): a one-sided bootstrap p. */
  pNotBetter: number;
}

export interface BootstrapOptions {
  resamples: number;
  seed: number;
  paired: boolean;
}

type Clusters = Map<string, number[]>;

function byCluster(records: readonly RequestRecord[], value: (r: RequestRecord) => number | null): Clusters {
  const m: Clusters = new Map();
  for (const r of records) {
    const v = value(r);
    if (v === null || !Number.isFinite(v)) continue;
    let list = m.get(r.cluster);
    if (!list) m.set(r.cluster, (list = []));
    list.push(v);
  }
  return m;
}

function statsOf(values: number[], stats: readonly Statistic[]): number[] {
  const sorted = Float64Array.from(values).sort();
  return stats.map((f) => f(sorted));
}

function ciOf(samples: number[]): [number, number] {
  const s = Float64Array.from(samples.filter(Number.isFinite)).sort();
  if (s.length === 0) return [Number.NaN, Number.NaN];
  // The interval's ends are plain nearest ranks of the resampled changes (not a GuideLLM metric).
  return [nearestRankSorted(s, 0.025), nearestRankSorted(s, 0.975)];
}

/** A statistic of one arm's values (sorted ascending). */
export type Statistic = (sorted: Float64Array) => number;

/** The q-quantile by GuideLLM's rule (the point estimates use the same). */
export const percentileOf =
  (q: number): Statistic =>
  (s) =>
    percentileSorted(s, q);

/** The mean, for distributions whose median can sit in either of two modes (cache hit or full prefill). */
export const meanOf: Statistic = (s) => s.reduce((a, x) => a + x, 0) / s.length;

export type StatChange = Omit<QuantileChange, 'q'>;

/**
 * Relative change of several percentiles of `value` between two arms, with bootstrap CIs.
 * baselineRuns[i] and treatmentRuns[i] are the same trial (same seed) of the two arms.
 */
export function bootstrapQuantileChange(
  baselineRuns: readonly (readonly RequestRecord[])[],
  treatmentRuns: readonly (readonly RequestRecord[])[],
  value: (r: RequestRecord) => number | null,
  qs: readonly number[],
  opts: BootstrapOptions,
): QuantileChange[] {
  return bootstrapChange(baselineRuns, treatmentRuns, value, qs.map(percentileOf), opts).map((c, i) => ({
    q: qs[i]!,
    ...c,
  }));
}

/** Relative change of any statistics of `value` between two arms, with bootstrap CIs (as above). */
export function bootstrapChange(
  baselineRuns: readonly (readonly RequestRecord[])[],
  treatmentRuns: readonly (readonly RequestRecord[])[],
  value: (r: RequestRecord) => number | null,
  stats: readonly Statistic[],
  opts: BootstrapOptions,
): StatChange[] {
  if (baselineRuns.length !== treatmentRuns.length)
    throw new RangeError('baseline and treatment need the same runs (trials)');
  const runs = baselineRuns.map((b, i) => {
    const A = byCluster(b, value);
    const B = byCluster(treatmentRuns[i]!, value);
    const union = [...new Set([...A.keys(), ...B.keys()])].sort();
    return { A, B, union, aKeys: [...A.keys()].sort(), bKeys: [...B.keys()].sort() };
  });
  const allA = runs.flatMap((r) => [...r.A.values()].flat());
  const allB = runs.flatMap((r) => [...r.B.values()].flat());
  const pointA = statsOf(allA, stats);
  const pointB = statsOf(allB, stats);

  const rng = Rng.derive(opts.seed, 'bootstrap');
  const changes: number[][] = stats.map(() => []);
  const a: number[] = [];
  const b: number[] = [];
  for (let it = 0; it < opts.resamples; it++) {
    a.length = 0;
    b.length = 0;
    for (let k = 0; k < runs.length; k++) {
      const run = runs[rng.int(runs.length)]!;
      if (opts.paired) {
        for (let j = 0; j < run.union.length; j++) {
          const c = run.union[rng.int(run.union.length)]!;
          const va = run.A.get(c);
          const vb = run.B.get(c);
          if (va) for (const v of va) a.push(v);
          if (vb) for (const v of vb) b.push(v);
        }
      } else {
        for (let j = 0; j < run.aKeys.length; j++)
          for (const v of run.A.get(run.aKeys[rng.int(run.aKeys.length)]!)!) a.push(v);
        for (let j = 0; j < run.bKeys.length; j++)
          for (const v of run.B.get(run.bKeys[rng.int(run.bKeys.length)]!)!) b.push(v);
      }
    }
    if (a.length === 0 || b.length === 0) continue;
    const sa = statsOf(a, stats);
    const sb = statsOf(b, stats);
    stats.forEach((_, i) => changes[i]!.push(sb[i]! / sa[i]! - 1));
  }
  return stats.map((_, i) => {
    const ch = changes[i]!;
    return {
      baseline: pointA[i]!,
      treatment: pointB[i]!,
      change: pointB[i]! / pointA[i]! - 1,
      ci95: ciOf(ch),
      pNotBetter: ch.length ? ch.filter((x) => x >= 0).length / ch.length : Number.NaN,
    };
  });
}

export interface RatioEstimate {
  baseline: number;
  treatment: number;
  /** treatment / baseline; null when the baseline is 0. */
  ratio: number | null;
  ci95: [number | null, number | null];
}

/**
 * Ratio of a per-run count-rate (e.g. goodput/min) between two arms. Level 1 resamples runs (paired).
 * Level 2 is a Poisson bootstrap of each chosen run: every request gets an independent Poisson(1) weight and
 * the run's count is the summed weight of the requests that counted, drawn directly as Poisson(k) for a run
 * with k counted requests (the same distribution, at a fraction of the draws). Why not resample the 0/1
 * indicators n times: how many requests complete in a window is itself random, and a fixed-n resample
 * ignores that, so runs where every request counted resample to the same count every time and the interval
 * collapses to a point.
 * `indicators[i]` are run i's completed-in-window requests, true when they count; `perMinute` scales counts.
 */
export function bootstrapRateRatio(
  baselineRuns: readonly (readonly boolean[])[],
  treatmentRuns: readonly (readonly boolean[])[],
  perMinute: number,
  opts: { resamples: number; seed: number },
): RatioEstimate {
  const count = (xs: readonly boolean[]): number => xs.reduce((s, x) => s + (x ? 1 : 0), 0);
  const mean = (runs: readonly (readonly boolean[])[]): number =>
    runs.length ? (runs.reduce((s, r) => s + count(r), 0) / runs.length) * perMinute : Number.NaN;
  const baseline = mean(baselineRuns);
  const treatment = mean(treatmentRuns);
  const rng = Rng.derive(opts.seed, 'bootstrap-ratio');
  const ratios: number[] = [];
  const countsA = baselineRuns.map(count);
  const countsB = treatmentRuns.map(count);
  for (let it = 0; it < opts.resamples; it++) {
    let sa = 0;
    let sb = 0;
    for (let k = 0; k < baselineRuns.length; k++) {
      const i = rng.int(baselineRuns.length);
      sa += rng.poisson(countsA[i]!);
      sb += rng.poisson(countsB[i]!);
    }
    ratios.push(sa > 0 ? sb / sa : Number.POSITIVE_INFINITY);
  }
  const s = Float64Array.from(ratios).sort();
  const fin = (x: number): number | null => (Number.isFinite(x) ? x : null);
  return {
    baseline,
    treatment,
    ratio: baseline > 0 ? treatment / baseline : null,
    ci95: [fin(nearestRankSorted(s, 0.025)), fin(nearestRankSorted(s, 0.975))],
  };
}
