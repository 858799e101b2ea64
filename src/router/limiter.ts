// The limiter of a plugin config: on the index's Redis (its own connection), or in memory for index: memory.
import { redisTlsSettings, type PluginConfig } from '../config/plugin-config.js';
import { FIRST_LOOKUP_BUDGET_MS } from './steps/lookup.js';
import { MemoryLimitStore, RedisLimitStore, TokenLimiter, limitsConfigured } from '../limits/index.js';

/**
 * null when the policies configure no limit, cap or budget (nothing counted, no connection). With a Redis
 * index, the counters live in the same Redis under redis_key_prefix, on a connection of their own, so the
 * admission script and the index lookup are in flight at once; `index: memory` counts in this process only.
 */
export function limiterFor(config: PluginConfig): TokenLimiter | null {
  const policies = config.policies;
  if (!policies || !limitsConfigured(policies)) return null;
  const store =
    config.index === 'memory'
      ? new MemoryLimitStore()
      : new RedisLimitStore({
          url: config.redis_url,
          cluster: config.redis_cluster,
          clusterNodes: config.redis_cluster_nodes,
          tls: redisTlsSettings(config),
        });
  return new TokenLimiter({
    policies,
    store,
    keyPrefix: config.redis_key_prefix,
    timeoutMs: config.redis_timeout_ms,
    firstTimeoutMs: FIRST_LOOKUP_BUDGET_MS,
  });
}
