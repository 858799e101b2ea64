// requestKeys: the block keys the router would compute for a body, with a recording index (no Redis).
import type { PluginConfig } from '../config/plugin-config.js';
import type { BlockKey, LookupResult } from '../core/types.js';
import { defaultResources } from './resources.js';
import { createRouter, type RouterResources } from './router.js';

/**
 * The block keys the router computes for `body` under `config`: the real pipeline (parse, template,
 * tokenizer, keys) with an index that records the lookup instead of answering it. Tests, benchmarks and
 * tools seed indexes with these, so they hold exactly what a routed request will look up.
 */
export async function requestKeys(config: PluginConfig, body: Uint8Array | string): Promise<BlockKey[]> {
  let seen: BlockKey[] = [];
  const recording: RouterResources['index'] = {
    listPods: async () => [],
    shareReservation: async () => undefined,
    endReservation: async () => undefined,
    sharedReservations: async () => [],
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
