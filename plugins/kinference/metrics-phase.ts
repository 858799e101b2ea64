// The plugin's decision metrics: one recorder and flusher per Redis, flushed again when the server exits.
import {
  redisSentinelSettings,
  redisTlsSettings,
  type PluginConfig,
} from '../../src/config/plugin-config.js';
import {
  DEFAULT_FLUSH_MS,
  PluginMetricsFlusher,
  PluginMetricsRecorder,
} from '../../src/plugin-metrics/index.js';
import { createUsageRedis } from '../../src/usage/index.js';
import { logOnce } from './log-once.js';

/** KINFERENCE_METRICS_FLUSH_MS overrides the flush interval (ms; tests, or a faster dashboard). */
function flushMs(): number {
  const v = Number(process.env.KINFERENCE_METRICS_FLUSH_MS);
  return Number.isFinite(v) && v >= 50 ? v : DEFAULT_FLUSH_MS;
}

/** One recorder (and its flusher, one Redis connection) per Redis and key prefix, shared by every config. */
const recorders = new Map<string, { recorder: PluginMetricsRecorder; flusher: PluginMetricsFlusher }>();

/**
 * The config's recorder: always on (with or without policies). Null only when its Redis client cannot be
 * built (an unreadable TLS file: said once; routing goes on without metrics).
 */
export function metricsRecorder(config: PluginConfig): PluginMetricsRecorder | null {
  const tls = redisTlsSettings(config);
  const sentinel = redisSentinelSettings(config);
  const redis = {
    url: config.redis_url,
    cluster: config.redis_cluster,
    ...(config.redis_cluster_nodes ? { clusterNodes: config.redis_cluster_nodes } : {}),
    ...(tls ? { tls } : {}),
    ...(sentinel ? { sentinel } : {}),
  };
  const key = JSON.stringify([redis, config.redis_key_prefix]);
  const known = recorders.get(key);
  if (known) return known.recorder;
  try {
    const client = createUsageRedis(redis);
    client.on('error', () => {}); // said once by the flusher's onError
    const recorder = new PluginMetricsRecorder();
    const flusher = new PluginMetricsFlusher(client, recorder, {
      keyPrefix: config.redis_key_prefix,
      intervalMs: flushMs(),
      onError: (e) =>
        logOnce(
          'metrics:flush',
          `decision metrics not flushed to Redis (kept for the next flush while Redis is down): ${String(e)}`,
        ),
    }).start();
    recorders.set(key, { recorder, flusher });
    return recorder;
  } catch (e) {
    logOnce('metrics:config', `decision metrics off for this config, routing goes on: ${String(e)}`);
    return null;
  }
}

/** Flushes every recorder once more (an exiting plugin server), within `timeoutMs`. */
export async function flushAllMetrics(timeoutMs: number): Promise<void> {
  await Promise.all([...recorders.values()].map((r) => r.flusher.close(timeoutMs)));
}
