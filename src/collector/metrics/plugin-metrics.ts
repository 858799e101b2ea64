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
import { registerRedisSeries, type RedisSeries } from './redis-series.js';

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
  type Rows = Map<SeriesKey, PluginSample[]>;
  const series: RedisSeries<Rows>[] = Object.entries(PLUGIN_SERIES).map(([key, def]) => ({
    name: PLUGIN_METRIC_PREFIX + def.suffix,
    help: def.help,
    type: def.type,
    values: (rows) =>
      (rows?.get(key as SeriesKey) ?? []).map((s) => ({
        labels: s.labels,
        value: s.value,
        metricName: s.name,
      })),
  }));
  series.push({
    name: PLUGIN_EXPORT_UP,
    help: "1 when the last read of the plugins' counters from Redis succeeded, 0 when it failed",
    type: 'gauge',
    values: (rows) => [{ labels: {}, value: rows ? 1 : 0 }],
  });
  registerRedisSeries(
    registry,
    { client: o.client, exporting: o.exporting, read: (c) => readPluginSamples(c, o.keyPrefix) },
    series,
  );
}
