// The index a spec reads to check what a collector or router wrote: its lookups get seconds, not 25 ms.
import { createKvIndex, type KvIndex, type KvIndexOptions } from '../../src/index/index.js';

/**
 * The index's default lookup budget is the router's (25 ms): on a loaded CI host a spec's own check can take
 * longer and would fail with KINF_ERR_REDIS_TIMEOUT for a reason no spec is about. Specs that test the
 * budget itself create their index with it.
 */
export const OBSERVER_LOOKUP_MS = 5000;

export function observerIndex(opts: Extract<KvIndexOptions, { kind: 'redis' }>): KvIndex {
  return createKvIndex({ lookupTimeoutMs: OBSERVER_LOOKUP_MS, ...opts });
}
