// The fleet's usage per class and model on the collector's /metrics, read from Redis at scrape time.
import type { Registry } from 'prom-client';
import type { Cluster, Redis } from 'ioredis';
import { TTFT_BUCKETS_MS, readFleetTotals, type FleetTotals, type UsageTotals } from '../../usage/index.js';
import { registerRedisSeries, type SeriesValue } from './redis-series.js';

/**
 * Every Kong node's plugin adds its requests to one Redis hash per fleet (src/usage, `<prefix>:usage:metrics`,
 * fields per class and model), so the sums are fleet-wide at the source. A Kong plugin server has no port
 * Prometheus could scrape on every node (it talks to Kong over a Unix socket); the collector already serves
 * /metrics, so it reads the hash at scrape time (one HGETALL) and exports it. Labels: class and model only,
 * never tenant (unbounded cardinality); per-tenant figures are in `kinference usage`.
 *
 * Two collectors (HA, writer lease): only the one holding the lease exports these series, the standby none,
 * so `sum()` over the collectors' targets counts the fleet once. The counters are Redis's, not the process's:
 * after a takeover the other collector's series go on from the same values (no reset, no double count).
 */

type Value = SeriesValue;

export const USAGE_METRIC_PREFIX = 'kinference_usage_';

/** The series this file exports (name, TYPE, help): the dashboard's spec greps these names. */
export const USAGE_SERIES = {
  requests: ['requests_total', 'counter', 'Requests recorded, shed ones included'],
  shed: ['shed_requests_total', 'counter', 'Requests refused before forwarding (429)'],
  prompt: [
    'prompt_tokens_total',
    'counter',
    'Prompt tokens of forwarded requests (exact: the router tokenized them)',
  ],
  cached: [
    'cached_prompt_tokens_total',
    'counter',
    'Prompt tokens the chosen pods were predicted to serve from their KV cache',
  ],
  output: [
    'output_tokens_total',
    'counter',
    'Output tokens: kind=estimated (from the bytes Kong sent) or exact (answers without a body)',
  ],
  cost: ['cost_total', 'counter', 'Estimated cost of priced requests, in policies.currency'],
  saving: [
    'cache_saving_total',
    'counter',
    'Cost saved by cached prompt tokens (input − cached input price)',
  ],
  unpriced: [
    'unpriced_requests_total',
    'counter',
    'Requests whose cost is unknown (a price it needs is missing)',
  ],
  ttft: ['ttft_seconds', 'histogram', 'TTFT of streamed answers (Kong latencies.proxy), fleet-wide'],
  up: [
    'export_up',
    'gauge',
    '1 when the last read of the usage counters from Redis succeeded, 0 when it failed',
  ],
} as const;

/** Full names of every usage series, as Prometheus sees them (histograms as their _bucket/_sum/_count). */
export function usageSeriesNames(): string[] {
  return Object.values(USAGE_SERIES).flatMap(([n, type]) =>
    type === 'histogram'
      ? [
          `${USAGE_METRIC_PREFIX}${n}_bucket`,
          `${USAGE_METRIC_PREFIX}${n}_sum`,
          `${USAGE_METRIC_PREFIX}${n}_count`,
        ]
      : [`${USAGE_METRIC_PREFIX}${n}`],
  );
}

function counters(rows: FleetTotals[], pick: (t: UsageTotals) => number): Value[] {
  return rows.map((r) => ({ labels: { class: r.serviceClass, model: r.model }, value: pick(r.totals) }));
}

function ttftValues(rows: FleetTotals[], name: string): Value[] {
  const out: Value[] = [];
  for (const r of rows) {
    const labels = { class: r.serviceClass, model: r.model };
    let acc = 0;
    for (const b of TTFT_BUCKETS_MS) {
      acc += r.totals[`ttft_le_${b}` as keyof UsageTotals];
      out.push({ labels: { ...labels, le: b / 1000 }, value: acc, metricName: `${name}_bucket` });
    }
    acc += r.totals.ttft_le_inf;
    out.push({ labels: { ...labels, le: '+Inf' }, value: acc, metricName: `${name}_bucket` });
    out.push({ labels, value: r.totals.ttft_sum_ms / 1000, metricName: `${name}_sum` });
    out.push({ labels, value: r.totals.ttft_count, metricName: `${name}_count` });
  }
  return out;
}

export interface UsageMetricsOptions {
  client: Redis | Cluster;
  keyPrefix: string;
  /** False while another collector exports (a standby of the writer lease): then no usage series at all. */
  exporting: () => boolean;
}

/**
 * Registers the usage series on the collector's registry. One HGETALL per scrape (shared by the series); a
 * failed read exports export_up 0 and no usage series, never a failed /metrics.
 */
export function registerUsageMetrics(registry: Registry, o: UsageMetricsOptions): void {
  const build: Record<keyof typeof USAGE_SERIES, (rows: FleetTotals[], name: string) => Value[]> = {
    requests: (r) => counters(r, (t) => t.requests),
    shed: (r) => counters(r, (t) => t.shed),
    prompt: (r) => counters(r, (t) => t.prompt_tokens),
    cached: (r) => counters(r, (t) => t.cached_tokens),
    output: (r) =>
      r.flatMap((x) => [
        {
          labels: { class: x.serviceClass, model: x.model, kind: 'estimated' },
          value: x.totals.output_tokens_estimated,
        },
        {
          labels: { class: x.serviceClass, model: x.model, kind: 'exact' },
          value: x.totals.output_tokens_exact,
        },
      ]),
    cost: (r) => counters(r, (t) => t.cost),
    saving: (r) => counters(r, (t) => t.saving),
    unpriced: (r) => counters(r, (t) => t.unpriced),
    ttft: ttftValues,
    up: () => [],
  };
  registerRedisSeries(
    registry,
    { client: o.client, exporting: o.exporting, read: (c) => readFleetTotals(c, o.keyPrefix) },
    Object.entries(USAGE_SERIES).map(([key, [suffix, type, help]]) => {
      const name = `${USAGE_METRIC_PREFIX}${suffix}`;
      const k = key as keyof typeof USAGE_SERIES;
      return {
        name,
        help,
        type,
        values: (rows: FleetTotals[] | null) =>
          k === 'up' ? [{ labels: {}, value: rows ? 1 : 0 }] : rows ? build[k](rows, name) : [],
      };
    }),
  );
}
