/**
 * GuideLLM's percentile rule (guidellm schemas/statistics.py): sort the values, build the normalised
 * cumulative weight, and take values[searchsorted(cdf, q, side="left")], i.e. the first value whose
 * cumulative weight reaches q. Nearest-rank, never interpolated: the median of an even-sized unweighted
 * sample is the lower middle value.
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

/** Nearest-rank percentile of values already sorted ascending (unweighted). NaN when empty. */
export function percentileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  // First i with (i+1)/n >= q. The epsilon guards q·n landing a hair above an integer in floating point.
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

/** Weighted nearest-rank percentile (GuideLLM weights ITL by output_tokens−1 and TPOT by output_tokens). */
export function weightedPercentile(items: readonly Weighted[], q: number): number {
  const kept = items.filter((x) => x.weight > 0 && Number.isFinite(x.value));
  if (kept.length === 0) return Number.NaN;
  kept.sort((a, b) => a.value - b.value);
  const total = kept.reduce((s, x) => s + x.weight, 0);
  let cum = 0;
  for (const x of kept) {
    cum += x.weight;
    if (cum / total >= q - 1e-12) return x.value;
  }
  return kept[kept.length - 1]!.value;
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
  for (const [k, q] of Object.entries(PERCENTILES) as [PercentileName, number][])
    percentiles[k] = weightedPercentile(items, q);
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
