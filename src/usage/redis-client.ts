// The usage records' own Redis client (standalone or Cluster, TLS from the config), failing fast when down.
import { Cluster, Redis } from 'ioredis';
import {
  clusterOptions,
  clusterSeeds,
  failFastOptions,
  redisTlsOptions,
  sentinelOptions,
  type RedisSentinelSettings,
  type RedisTlsSettings,
} from '../index/index.js';

export interface UsageRedisOptions {
  url: string;
  cluster?: boolean;
  clusterNodes?: readonly string[];
  tls?: RedisTlsSettings;
  /** Redis Sentinel: the primary the sentinels name (the URL then gives only user, password, db and TLS). */
  sentinel?: RedisSentinelSettings;
}

/**
 * A lazy client with the index's fail-fast rules (no offline queue, nothing resent): a record written while
 * Redis is down is dropped, never queued in the plugin's memory. `connectTimeoutMs` bounds the CLI's wait.
 */
export function createUsageRedis(o: UsageRedisOptions, connectTimeoutMs = 2000): Redis | Cluster {
  const tls = redisTlsOptions(o.url, o.tls);
  if (o.cluster)
    return new Cluster(
      clusterSeeds(o.url, o.clusterNodes ?? []),
      clusterOptions(o.url, { connectTimeoutMs, ...(o.tls ? { tls: o.tls } : {}) }, tls),
    );
  if (o.sentinel) return new Redis(o.url, sentinelOptions(o.sentinel, { connectTimeoutMs }, tls));
  return new Redis(o.url, {
    ...failFastOptions({ connectTimeoutMs }),
    ...(tls !== undefined ? { tls } : {}),
  });
}
