/**
 * GuideLLM's percentile rule (guidellm schemas/statistics.py, DistributionSummary.from_values and
 * Percentiles.from_pdf), float for float: sort the values, merge equal ones (their weights summed), drop
 * zero weights, p_i = w_i / Σw, cdf = the running sum of p_i (np.cumsum, left to right), and take
 * values[searchsorted(cdf, q, side="left")], the first value whose cdf reaches q. Nearest-rank, never
 * interpolated; but the running sum is not exact, so where q·n is a whole number the cdf can land a hair
 * below q and the next value is taken: the median of 12 or 194 equally weighted values is the upper middle
 * one, of 10 or 200 the lower. GuideLLM reports that, so the benchmark computes the same.
 */

export const PERCENTILES = {
  p001: 0.001,
  p01: 0.01,
  p05: 0.05,
  p10: 0.1,
  p25: 0.25,
  p50: 0.5,
  p75: 0.75,
  p90: 0.9,
  p95: 0.95,
  p99: 0.99,
  p999: 0.999,
} as const;

export type PercentileName = keyof typeof PERCENTILES;

export interface DistributionSummary {
  count: number;
  mean: number;
  median: number;
  variance: number;
  std_dev: number;
  min: number;
  max: number;
  total_sum: number;
  percentiles: Record<PercentileName, number>;
}

/**
 * GuideLLM's percentiles of values sorted ascending with their weights (null: all 1), one per q; NaN when
 * nothing has weight. Weights are whole numbers here (1, output tokens), so Σw is exact in any order.
 */
export function guidellmPercentilesSorted(
  sorted: ArrayLike<number>,
  weights: ArrayLike<number> | null,
  qs: readonly number[],
): number[] {
  // Equal values merged, zero-weight values dropped (np.unique, then the nonzero mask).
  const vals: number[] = [];
  const ws: number[] = [];
  for (let i = 0; i < sorted.length; i++) {
    const v = sorted[i]!;
    const w = weights === null ? 1 : weights[i]!;
    if (!Number.isFinite(v)) continue;
    if (vals.length > 0 && vals[vals.length - 1] === v) ws[ws.length - 1]! += w;
    else {
      vals.push(v);
      ws.push(w);
    }
  }
  const keptV: number[] = [];
  const keptW: number[] = [];
  for (let i = 0; i < vals.length; i++)
    if (ws[i]! > 0) {
      keptV.push(vals[i]!);
      keptW.push(ws[i]!);
    }
  if (keptV.length === 0) return qs.map(() => Number.NaN);
  let total = keptW.reduce((a, w) => a + w, 0);
  // GuideLLM falls back to uniform weights when the total is below its epsilon.
  if (total <= 1e-6) {
    keptW.fill(1);
    total = keptW.length;
  }
  const out: number[] = qs.map(() => keptV[keptV.length - 1]!);
  const order = qs.map((q, i) => ({ q, i })).sort((a, b) => a.q - b.q);
  let k = 0;
  let cdf = 0;
  for (let j = 0; j < keptV.length && k < order.length; j++) {
    cdf += keptW[j]! / total;
    while (k < order.length && cdf >= order[k]!.q) out[order[k++]!.i] = keptV[j]!;
  }
  return out;
}

/**
 * GuideLLM's percentile of values already sorted ascending (unweighted). NaN when empty. The same
 * arithmetic as guidellmPercentilesSorted without allocating: the bootstrap calls it per resample.
 */
export function percentileSorted(sorted: ArrayLike<number>, q: number): number {
  let n = 0;
  for (let i = 0; i < sorted.length; i++) if (Number.isFinite(sorted[i]!)) n++;
  if (n === 0) return Number.NaN;
  let cdf = 0;
  let last = Number.NaN;
  for (let i = 0; i < sorted.length;) {
    const v = sorted[i]!;
    let j = i + 1;
    while (j < sorted.length && sorted[j] === v) j++;
    if (Number.isFinite(v)) {
      cdf += (j - i) / n;
      last = v;
      if (cdf >= q) return v;
    }
    i = j;
  }
  return last;
}

/**
 * Exact nearest rank of values sorted ascending: the first i with (i+1)/n ≥ q. For quantiles that are not
 * GuideLLM metrics (a bootstrap interval's ends), where float noise in a running sum has no business.
 */
export function nearestRankSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  // The epsilon guards q·n landing a hair above an integer in floating point.
  const i = Math.max(0, Math.ceil(q * n - 1e-9) - 1);
  return sorted[Math.min(n - 1, i)]!;
}

export function percentile(values: readonly number[], q: number): number {
  return percentileSorted(Float64Array.from(values).sort(), q);
}

interface Weighted {
  value: number;
  weight: number;
}

function sortedWeighted(items: readonly Weighted[]): { values: number[]; weights: number[] } {
  const kept = items.filter((x) => Number.isFinite(x.value)).sort((a, b) => a.value - b.value);
  return { values: kept.map((x) => x.value), weights: kept.map((x) => x.weight) };
}

/** Weighted GuideLLM percentile (GuideLLM weights ITL by output_tokens−1 and TPOT by output_tokens). */
export function weightedPercentile(items: readonly Weighted[], q: number): number {
  const { values, weights } = sortedWeighted(items);
  return guidellmPercentilesSorted(values, weights, [q])[0]!;
}

/** Summary of a (optionally weighted) sample; weights default to 1. */
export function summarize(values: readonly number[], weights?: readonly number[]): DistributionSummary {
  const items: Weighted[] = values
    .map((value, i) => ({ value, weight: weights ? weights[i]! : 1 }))
    .filter((x) => x.weight > 0 && Number.isFinite(x.value));
  const percentiles = {} as Record<PercentileName, number>;
  if (items.length === 0) {
    for (const k of Object.keys(PERCENTILES) as PercentileName[]) percentiles[k] = Number.NaN;
    return {
      count: 0,
      mean: Number.NaN,
      median: Number.NaN,
      variance: Number.NaN,
      std_dev: Number.NaN,
      min: Number.NaN,
      max: Number.NaN,
      total_sum: 0,
      percentiles,
    };
  }
  const totalWeight = items.reduce((s, x) => s + x.weight, 0);
  const mean = items.reduce((s, x) => s + x.weight * x.value, 0) / totalWeight;
  const variance = items.reduce((s, x) => s + x.weight * (x.value - mean) ** 2, 0) / totalWeight;
  const sorted = sortedWeighted(items);
  const names = Object.keys(PERCENTILES) as PercentileName[];
  const ps = guidellmPercentilesSorted(
    sorted.values,
    sorted.weights,
    names.map((k) => PERCENTILES[k]),
  );
  names.forEach((k, i) => (percentiles[k] = ps[i]!));
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const x of items) {
    if (x.value < min) min = x.value;
    if (x.value > max) max = x.value;
  }
  return {
    count: items.length,
    mean,
    median: percentiles.p50,
    variance,
    std_dev: Math.sqrt(variance),
    min,
    max,
    total_sum: items.reduce((s, x) => s + x.value, 0),
    percentiles,
  };
}
