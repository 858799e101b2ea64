// A usage record: the hash fields of one request, TTFT buckets, keys per tenant/model/UTC hour.
import type { CostEstimate } from './prices.js';
import type { OutputEstimate } from './output-tokens.js';

/** TTFT bucket bounds (ms) of the usage records and the fleet metrics; the last bucket is everything above. */
export const TTFT_BUCKETS_MS = [100, 250, 500, 1000, 2500, 5000, 10000, 30000] as const;
/** The tenant every tenant past the hour's cap is counted under: parentheses are never in a tenant name. */
export const OVERFLOW_TENANT = '(overflow)';
/** Distinct tenants recorded per UTC hour before the rest go to OVERFLOW_TENANT (bounds Redis). */
export const DEFAULT_MAX_TENANTS_PER_HOUR = 1000;

/** What the log phase knows of one request, for its usage record. */
export interface UsageEvent {
  atMs: number;
  tenant: string;
  /** The service class: a label of the fleet metrics (tenants never are). */
  serviceClass: string;
  model: string;
  /** Refused before forwarding (429): counted, no tokens served. */
  shed: boolean;
  promptTokens: number;
  /** Prompt tokens the chosen pod was predicted to serve from its cache. */
  cachedTokens: number;
  /** null: the output could not be counted nor estimated (e.g. a compressed body). */
  output: OutputEstimate | null;
  /** Kong's latencies.proxy of a streamed answer; null when it is not a TTFT. */
  ttftMs: number | null;
  cost: CostEstimate;
}

/** Every counter of a record, in report order; the `_ms`, cost and saving fields are floats (one le field per TTFT_BUCKETS_MS). */
export const USAGE_FIELDS = [
  'requests',
  'shed',
  'prompt_tokens',
  'cached_tokens',
  'output_tokens_exact',
  'output_tokens_estimated',
  'output_unknown',
  'ttft_count',
  'ttft_sum_ms',
  'ttft_le_100',
  'ttft_le_250',
  'ttft_le_500',
  'ttft_le_1000',
  'ttft_le_2500',
  'ttft_le_5000',
  'ttft_le_10000',
  'ttft_le_30000',
  'ttft_le_inf',
  'cost',
  'saving',
  'unpriced',
] as const;
export type UsageField = (typeof USAGE_FIELDS)[number];
export type UsageTotals = Record<UsageField, number>;

export const FLOAT_FIELDS: ReadonlySet<string> = new Set(['ttft_sum_ms', 'cost', 'saving']);

export function zeroTotals(): UsageTotals {
  return Object.fromEntries(USAGE_FIELDS.map((f) => [f, 0])) as UsageTotals;
}

/** The bucket field a TTFT counts in (buckets are disjoint; readers accumulate them). */
export function ttftBucket(ms: number): UsageField {
  for (const b of TTFT_BUCKETS_MS) if (ms <= b) return `ttft_le_${b}` as UsageField;
  return 'ttft_le_inf';
}

/** The non-zero increments of one request. */
export function usageIncrements(e: UsageEvent): [UsageField, number][] {
  const out: [UsageField, number][] = [['requests', 1]];
  if (e.shed) return [...out, ['shed', 1]];
  out.push(['prompt_tokens', e.promptTokens], ['cached_tokens', e.cachedTokens]);
  if (e.output === null) out.push(['output_unknown', 1]);
  else out.push([e.output.exact ? 'output_tokens_exact' : 'output_tokens_estimated', e.output.tokens]);
  if (e.ttftMs !== null) out.push(['ttft_count', 1], ['ttft_sum_ms', e.ttftMs], [ttftBucket(e.ttftMs), 1]);
  if (e.cost.cost === null) out.push(['unpriced', 1]);
  else out.push(['cost', e.cost.cost]);
  if (e.cost.saving !== null) out.push(['saving', e.cost.saving]);
  return out.filter(([, v]) => v !== 0 && Number.isFinite(v));
}

/** UTC hour of an instant as the keys name it: YYYYMMDDHH. */
export function hourOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 13).replace(/[-T]/g, '');
}

/** The first instant of a YYYYMMDDHH hour. */
export function hourStartMs(hour: string): number {
  return Date.UTC(+hour.slice(0, 4), +hour.slice(4, 6) - 1, +hour.slice(6, 8), +hour.slice(8, 10));
}

/**
 * The keys of one UTC hour share a hash tag, so one script can update them on a Redis Cluster:
 * `<prefix>:usage:{<prefix>:<hour>}:` then `tenants` (the hour's set of tenants, for the cap), `index` (its
 * tenant/model members) and `r:<member>` (one hash per tenant and model).
 */
export function hourBase(prefix: string, hour: string): string {
  return `${prefix}:usage:{${prefix}:${hour}}:`;
}

/** A record's member in the hour's index: JSON of [tenant, model] (model names may hold any character). */
export const recordMember = (tenant: string, model: string): string => JSON.stringify([tenant, model]);

/** The fleet-wide totals per class and model since the first record (no TTL: classes × models fields). */
export const metricsKey = (prefix: string): string => `${prefix}:usage:metrics`;
/** A metrics hash field: class, model and counter, tab-separated. */
export const metricsFieldPrefix = (serviceClass: string, model: string): string =>
  `${serviceClass}\t${model}\t`;
