// Reads the plugins' summed series back from Redis as Prometheus samples (counters, cumulative histograms).
import type { Cluster, Redis } from 'ioredis';
import { PLUGIN_METRIC_PREFIX, PLUGIN_SERIES, pluginMetricsKey, type SeriesKey } from './series.js';

export interface PluginSample {
  /** The full Prometheus name (a histogram's _bucket, _sum or _count). */
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Fields read per scrape at most: far above what the label caps allow, a guard against a foreign writer. */
export const MAX_FIELDS = 50_000;

/** Prometheus's text form of a bucket bound (`0.5`, `+Inf`). */
const le = (b: number | 'inf'): string => (b === 'inf' ? '+Inf' : String(b));

/**
 * Every sample of the plugins' hash, grouped by series key: counters as they are, histograms with their
 * disjoint buckets accumulated (every bound of the series present, so `histogram_quantile` works). Fields that
 * do not parse or name no known series are skipped.
 */
export function samplesOf(hash: Record<string, string>): Map<SeriesKey, PluginSample[]> {
  const out = new Map<SeriesKey, PluginSample[]>();
  // Histograms: label set → disjoint bucket counts, sum, count.
  const hist = new Map<string, { key: SeriesKey; labels: string[]; parts: Map<string, number> }>();
  for (const [field, raw] of Object.entries(hash)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(field);
    } catch {
      continue;
    }
    if (!Array.isArray(parsed) || !parsed.every((x) => typeof x === 'string' || typeof x === 'number'))
      continue;
    const key = parsed[0] as SeriesKey;
    const def = Object.hasOwn(PLUGIN_SERIES, key) ? PLUGIN_SERIES[key] : undefined;
    if (!def) continue;
    const n = def.labels.length;
    const labels = parsed.slice(1, n + 1).map(String);
    const value = Number(raw);
    if (labels.length !== n || !Number.isFinite(value)) continue;
    if (def.type === 'counter') {
      if (parsed.length !== n + 1) continue;
      const list = out.get(key) ?? [];
      list.push({
        name: PLUGIN_METRIC_PREFIX + def.suffix,
        labels: Object.fromEntries(def.labels.map((l, i) => [l, labels[i]!])),
        value,
      });
      out.set(key, list);
      continue;
    }
    if (parsed.length !== n + 2) continue;
    const id = JSON.stringify([key, ...labels]);
    let h = hist.get(id);
    if (!h) hist.set(id, (h = { key, labels, parts: new Map() }));
    h.parts.set(String(parsed[n + 1]), value);
  }
  for (const { key, labels, parts } of hist.values()) {
    const def = PLUGIN_SERIES[key] as {
      suffix: string;
      labels: readonly string[];
      buckets: readonly number[];
    };
    const name = PLUGIN_METRIC_PREFIX + def.suffix;
    const base = Object.fromEntries(def.labels.map((l, i) => [l, labels[i]!]));
    const list = out.get(key) ?? [];
    let acc = 0;
    for (const b of [...def.buckets, 'inf' as const]) {
      acc += parts.get(String(b)) ?? 0;
      list.push({ name: `${name}_bucket`, labels: { ...base, le: le(b) }, value: acc });
    }
    list.push({ name: `${name}_sum`, labels: base, value: parts.get('sum') ?? 0 });
    list.push({ name: `${name}_count`, labels: base, value: parts.get('count') ?? 0 });
    out.set(key, list);
  }
  return out;
}

/** One HGETALL of the plugins' hash (an HLEN first: a hash past MAX_FIELDS is refused, not read). */
export async function readPluginSamples(
  client: Redis | Cluster,
  keyPrefix: string,
): Promise<Map<SeriesKey, PluginSample[]>> {
  const key = pluginMetricsKey(keyPrefix);
  const len = await client.hlen(key);
  if (len > MAX_FIELDS) throw new Error(`${key} has ${len} fields, more than ${MAX_FIELDS}: not exported`);
  return samplesOf(await client.hgetall(key));
}
