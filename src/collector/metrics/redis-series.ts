// Series the collector exports from one Redis read at scrape time (the plugins' counters, the fleet's usage).
import type { Registry } from 'prom-client';
import type { Cluster, Redis } from 'ioredis';

export type SeriesValue = { labels: Record<string, string | number>; value: number; metricName?: string };
type Metric = { name: string; help: string; type: 'counter' | 'gauge' | 'histogram'; values: SeriesValue[] };

export interface RedisSeries<T> {
  name: string;
  help: string;
  type: Metric['type'];
  /** Its samples from the scrape's read; `rows` is null when the read failed. */
  values(rows: T | null): SeriesValue[];
}

export interface RedisSeriesOptions<T> {
  client: Redis | Cluster;
  /** The one read every series of a scrape shares. */
  read(client: Redis | Cluster): Promise<T>;
  /** False on a standby of the writer lease: then no series at all (a sum over collectors counts once). */
  exporting: () => boolean;
}

/**
 * Registers `series` on the registry, all fed by one read per scrape: prom-client asks each series in turn,
 * so the read is shared for a second. A failed read gives `rows` null, never a failed /metrics.
 */
export function registerRedisSeries<T>(
  registry: Registry,
  o: RedisSeriesOptions<T>,
  series: RedisSeries<T>[],
): void {
  let pending: { atMs: number; rows: Promise<T | null> } | null = null;
  const read = (): Promise<T | null> => {
    const now = Date.now();
    if (pending && now - pending.atMs < 1000) return pending.rows;
    const rows = (async () => {
      if (o.client.status === 'wait') await o.client.connect();
      return o.read(o.client);
    })().catch(() => null);
    pending = { atMs: now, rows };
    return rows;
  };
  for (const s of series) {
    const { name, help, type } = s;
    const metric = {
      name,
      help,
      type,
      aggregator: 'sum',
      async get(): Promise<Metric> {
        return { name, help, type, values: o.exporting() ? s.values(await read()) : [] };
      },
      reset() {},
    };
    registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
  }
}
