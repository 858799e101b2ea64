// The keys step: the prompt's chained block keys from a seed of model, adapter and cache salt.
import { blockKeys, keySeed, type KeySeedInput } from '../../core/block-keys.js';
import type { BlockKey } from '../../core/types.js';

/**
 * The keys step: one key per full block of the prompt's tokens, chained from a seed of the model, adapter and
 * cache salt (core/block-keys.ts; the collector computes the same keys from the pods' KV events).
 */
export function promptKeys(tokens: readonly number[], blockSize: number, seed: KeySeedInput): BlockKey[] {
  return blockKeys(tokens, blockSize, keySeed(seed));
}
