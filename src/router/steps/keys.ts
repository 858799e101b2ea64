// The keys step: the prompt's chained block keys from a seed of model, adapter and cache salt.
import { ChainMemo } from '../../core/block-keys.js';
import type { BlockKey } from '../../core/types.js';

/**
 * Recent prompts' keys, shared by the routers of this process (chains are told apart by seed and block size):
 * 1M tokens of ids held at most (~8 MB) over 16 prompts.
 */
export const CHAIN_MEMO_TOKENS = 1 << 20;
const recent = new ChainMemo(CHAIN_MEMO_TOKENS, 16);

/**
 * The keys step: one key per full block of the prompt's tokens, chained from a seed of the model, adapter and
 * cache salt (core/block-keys.ts keySeed; the collector computes the same keys from the pods' KV events). Only
 * the blocks after the longest prefix shared with a recent prompt are hashed.
 */
export function chainKeys(tokens: readonly number[], blockSize: number, seed: BlockKey): BlockKey[] {
  return recent.keys(tokens, blockSize, seed);
}
