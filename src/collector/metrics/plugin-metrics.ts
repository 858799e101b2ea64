// The plugins' decision series, summed over every Kong node in Redis, on the collector's /metrics.
import type { Registry } from 'prom-client';
import type { Cluster, Redis } from 'ioredis';
import {
  PLUGIN_METRIC_PREFIX,
  PLUGIN_SERIES,
  readPluginSamples,
  type PluginSample,
  type SeriesKey,
} from '../../plugin-metrics/index.js';

type Value = { labels: Record<string, string | number>; value: number; metricName?: string };
type Metric = { name: string; help: string; type: 'counter' | 'gauge' | 'histogram'; values: Value[] };

export const PLUGIN_EXPORT_UP = `${PLUGIN_METRIC_PREFIX}metrics_export_up`;

export interface PluginMetricsOptions {
  client: Redis | Cluster;
  keyPrefix: string;
  /** False on a standby of the writer lease: then no plugin series at all (a sum over collectors counts once). */
  exporting: () => boolean;
}

/**
 * Registers every plugin series (src/plugin-metrics) on the collector's registry. Each plugin server adds its
 * counts to one Redis hash every few seconds; this reads the hash at scrape time (one HLEN + HGETALL, shared
 * by the series) and exports the fleet's sums. A failed read exports `kinference_plugin_metrics_export_up 0`
 * and no plugin series, never a failed /metrics.
 */
export function registerPluginMetrics(registry: Registry, o: PluginMetricsOptions): void {
  let pending: { atMs: number; rows: Promise<Map<SeriesKey, PluginSample[]> | null> } | null = null;
  const read = (): Promise<Map<SeriesKey, PluginSample[]> | null> => {
    const now = Date.now();
    if (pending && now - pending.atMs < 1000) return pending.rows;
    const rows = (async () => {
      if (o.client.status === 'wait') await o.client.connect();
      return readPluginSamples(o.client, o.keyPrefix);
    })().catch(() => null);
    pending = { atMs: now, rows };
    return rows;
  };
  const add = (m: unknown): void => registry.registerMetric(m as Parameters<Registry['registerMetric']>[0]);
  for (const [key, def] of Object.entries(PLUGIN_SERIES)) {
    const name = PLUGIN_METRIC_PREFIX + def.suffix;
    const { help, type } = def;
    add({
      name,
      help,
      type,
      aggregator: 'sum',
      async get(): Promise<Metric> {
        if (!o.exporting()) return { name, help, type, values: [] };
        const rows = await read();
        const samples = rows?.get(key as SeriesKey) ?? [];
        return {
          name,
          help,
          type,
          values: samples.map((s) => ({ labels: s.labels, value: s.value, metricName: s.name })),
        };
      },
      reset() {},
    });
  }
  const upHelp = "1 when the last read of the plugins' counters from Redis succeeded, 0 when it failed";
  add({
    name: PLUGIN_EXPORT_UP,
    help: upHelp,
    type: 'gauge',
    aggregator: 'sum',
    async get(): Promise<Metric> {
      const base = { name: PLUGIN_EXPORT_UP, help: upHelp, type: 'gauge' as const };
      if (!o.exporting()) return { ...base, values: [] };
      return { ...base, values: [{ labels: {}, value: (await read()) ? 1 : 0 }] };
    },
    reset() {},
  });
}
