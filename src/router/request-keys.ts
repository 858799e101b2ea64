import type { PluginConfig } from '../config/plugin-config.js';
import type { BlockKey, LookupResult } from '../core/types.js';
import type { KvIndex } from '../index/kv-index.js';
import { defaultResources } from './resources.js';
import { createRouter } from './router.js';

/**
 * The block keys the router computes for `body` under `config`: the real pipeline (parse, template,
 * tokenizer, keys) with an index that records the lookup instead of answering it. Tests, benchmarks and
 * tools seed indexes with these, so they hold exactly what a routed request will look up.
 */
export async function requestKeys(config: PluginConfig, body: Uint8Array | string): Promise<BlockKey[]> {
  let seen: BlockKey[] = [];
  const recording: KvIndex = {
    apply: async () => undefined,
    upsertPodState: async () => undefined,
    removePod: async () => undefined,
    listPods: async () => [],
    shareReservation: async () => undefined,
    endReservation: async () => undefined,
    sharedReservations: async () => [],
    saveHandoff: async () => false,
    takeHandoff: async () => ({ kind: 'none' }),
    close: async () => undefined,
    lookup: async (_model: string, keys: readonly BlockKey[]): Promise<LookupResult> => {
      seen = [...keys];
      return { pods: [] };
    },
  };
  await createRouter(config, { ...defaultResources({ ...config, index: 'memory' }), index: recording }).route(
    body,
  );
  return seen;
}
