// The plugin's decision series: names, labels, buckets, and how one sample is keyed in the Redis hash.
import { FALLBACK_REASONS } from '../core/fallback.js';

export const PLUGIN_METRIC_PREFIX = 'kinference_plugin_';

/** How a request left the access phase: the `outcome` label of the decisions. */
export const DECISION_OUTCOMES = ['routed', 'load_only', 'kong_default', 'shed', 'limited'] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

/** Why a request was answered 429 before forwarding: the `cause` label of the sheds. */
export const SHED_CAUSES = ['ttft_slo', 'class_overload', 'token_limit'] as const;
export type ShedCause = (typeof SHED_CAUSES)[number];

/** The `reason` label: a fallback reason (src/core/fallback.ts, a closed list) or `none`. */
export const REASONS = ['none', ...FALLBACK_REASONS] as const;

/** A model the recorder does not label by name: no model read, or one no pod of the fleet serves. */
export const NO_MODEL = '(none)';
export const OTHER_MODEL = '(other)';
/** Without policies every request is in this class. */
export const NO_CLASS = '(none)';
/** Distinct model and class names one process labels before the rest become OTHER_MODEL / `(other)`. */
export const MAX_MODELS = 64;
export const MAX_CLASSES = 32;

/** Route time buckets (seconds): a warm decision is ~1 ms, the lookup deadline tens of ms. */
export const ROUTE_BUCKETS_S = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1] as const;
/** TTFT buckets (seconds), predicted and measured alike. */
export const TTFT_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;
/** measured / predicted TTFT: 0.8–1.25 is "within 25%". */
export const RATIO_BUCKETS = [0.25, 0.5, 0.8, 1.25, 2, 4] as const;

interface SeriesDef {
  suffix: string;
  type: 'counter' | 'histogram';
  labels: readonly string[];
  help: string;
  buckets?: readonly number[];
}

/** Every series the plugins record and the collector exports (its lease holder, from Redis). */
export const PLUGIN_SERIES = {
  decisions: {
    suffix: 'decisions_total',
    type: 'counter',
    labels: ['model', 'class', 'outcome', 'reason'],
    help: 'Routing decisions: outcome routed (on prediction), load_only (a fallback routed on load), kong_default (Kong kept its target), shed, limited (429); reason the fallback reason or none',
  },
  shed: {
    suffix: 'shed_requests_total',
    type: 'counter',
    labels: ['model', 'class', 'cause'],
    help: 'Requests answered 429 before forwarding: cause ttft_slo (shed_ttft_slo_ms), class_overload (a sheddable class), token_limit (a limit, cap or budget)',
  },
  prompt: {
    suffix: 'prompt_tokens_total',
    type: 'counter',
    labels: ['model', 'class'],
    help: 'Prompt tokens of requests sent to a pod (exact: the router tokenized them)',
  },
  cached: {
    suffix: 'cached_prompt_tokens_total',
    type: 'counter',
    labels: ['model', 'class'],
    help: 'Prompt tokens the chosen pods were predicted to serve from their KV cache (GPU or CPU tier)',
  },
  route: {
    suffix: 'route_seconds',
    type: 'histogram',
    labels: ['outcome'],
    help: 'Time the router took to decide (parse, template, tokenize, keys, lookup, predict, choose)',
    buckets: ROUTE_BUCKETS_S,
  },
  ttft: {
    suffix: 'ttft_seconds',
    type: 'histogram',
    labels: ['model', 'class', 'kind'],
    help: 'TTFT of streamed 200 answers routed on prediction: kind predicted (the router, for the chosen pod) or measured (Kong latencies.proxy), the same requests',
    buckets: TTFT_BUCKETS_S,
  },
  ratio: {
    suffix: 'ttft_ratio',
    type: 'histogram',
    labels: ['model', 'class'],
    help: 'Measured over predicted TTFT of the same requests (1 = exact)',
    buckets: RATIO_BUCKETS,
  },
  flushes: {
    suffix: 'metrics_flushes_total',
    type: 'counter',
    labels: [],
    help: 'Flushes of the plugin servers into Redis (each process every flush interval it had something to write)',
  },
  lost: {
    suffix: 'metrics_lost_flushes_total',
    type: 'counter',
    labels: [],
    help: 'Flushes whose increments were dropped (Redis failed while applying them; counted at the next flush)',
  },
} as const satisfies Record<string, SeriesDef>;

export type SeriesKey = keyof typeof PLUGIN_SERIES;

/** The part of a histogram a hash field counts: a bucket (disjoint, by upper bound), its sum or its count. */
export type HistogramPart = number | 'inf' | 'sum' | 'count';

/**
 * The Redis hash field of one sample: JSON of [series, ...label values] and, for a histogram, its part.
 * JSON keeps any character a model name may hold; the reader checks every field against PLUGIN_SERIES.
 */
export function fieldOf(series: SeriesKey, labels: readonly string[], part?: HistogramPart): string {
  return JSON.stringify(part === undefined ? [series, ...labels] : [series, ...labels, part]);
}

/** Full names of every plugin series as Prometheus sees them (histograms as _bucket/_sum/_count). */
export function pluginSeriesNames(): string[] {
  return Object.values(PLUGIN_SERIES as Record<string, SeriesDef>).flatMap((d) => {
    const n = `${PLUGIN_METRIC_PREFIX}${d.suffix}`;
    return d.type === 'histogram' ? [`${n}_bucket`, `${n}_sum`, `${n}_count`] : [n];
  });
}

/** The disjoint bucket a value counts in: the first bound it does not exceed, else `inf`. */
export function bucketOf(value: number, bounds: readonly number[]): number | 'inf' {
  for (const b of bounds) if (value <= b) return b;
  return 'inf';
}

/** The one Redis hash every plugin server adds to (no TTL: its fields are bounded by the label sets). */
export const pluginMetricsKey = (prefix: string): string => `${prefix}:plugin:metrics`;
