// createKvIndex: the one way the router, the collector and the tools obtain an index (Redis or in-memory).
import type { KvIndex } from './kv-index.js';
import { MemoryKvIndex } from './memory-index.js';
import type { IndexLog, RedisSentinelSettings, RedisTlsSettings } from './redis-connection.js';
import { RedisKvIndex } from './redis-index.js';

export type KvIndexOptions =
  | { kind: 'memory' }
  | {
      kind: 'redis';
      url: string;
      /** `url` is one node of a Redis Cluster. */
      cluster?: boolean;
      /** With `cluster`: more nodes to start from (host:port) when the URL's node does not answer. */
      clusterNodes?: readonly string[];
      /** With a rediss:// URL: CA, client certificate and key files, server name (redis-connection.ts). */
      tls?: RedisTlsSettings;
      /** The primary is the one these sentinels name (the URL gives only user, password, db and TLS). */
      sentinel?: RedisSentinelSettings;
      keyPrefix?: string;
      lookupTimeoutMs?: number;
      blockTtlSeconds?: number;
      /** Budget of writes and listPods, ms (default 2000). */
      commandTimeoutMs?: number;
      /** Writers: how often to check that Redis still holds their writes, ms (default 5000; 0 = never). */
      verifyIntervalMs?: number;
      /** Connection changes and lost writes, one line per transition (default: silent). */
      log?: IndexLog;
      /**
       * A writer holding writer leases (the collector): its lease holder value, formatLeaseHolder(holder).
       * Each write is then refused (KINF_ERR_LEASE_LOST) when the model's lease key holds another value.
       * `shard` ('i/n'): a sharded collector's lease (collector.shard_index/shard_count).
       */
      fence?: { holderValue: string; shard?: string };
    };

/**
 * The one way other parts obtain an index. Opens no connection: a Redis index connects on first use, so
 * this is safe wherever objects are built eagerly. Bad options throw KINF_ERR_CONFIG.
 */
export function createKvIndex(opts: KvIndexOptions): KvIndex {
  switch (opts.kind) {
    case 'memory':
      return new MemoryKvIndex();
    case 'redis':
      return new RedisKvIndex(opts);
  }
}
