// vLLM's block hashes (bytes or int) normalised to one string type; a falsy parent means no parent.
import type { VllmBlockHash } from '../../core/types.js';

const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;
const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/**
 * vLLM's ExternalBlockHash (bytes | int) as one string type:
 * - uint64 (msgpack cf, decoded as BigInt so nothing above 2^53 is rounded) and smaller ints → decimal;
 * - negative int64 (Python hash() in v0.9/v0.10) → its signed decimal;
 * - bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: the raw digest) → lowercase hex.
 * Returns null for anything else. The value is opaque to us: it is only a map key.
 */
export function normaliseBlockHash(v: unknown): VllmBlockHash | null {
  // -0 + 0 is 0: a hash is a key, and "-0" and "0" must not be two of them.
  if (typeof v === 'number') return Number.isSafeInteger(v) ? (String(v + 0) as VllmBlockHash) : null;
  if (typeof v === 'bigint')
    return v >= INT64_MIN && v <= UINT64_MAX ? (v.toString() as VllmBlockHash) : null;
  if (v instanceof Uint8Array) {
    if (v.length === 0) return null;
    let s = '';
    for (let i = 0; i < v.length; i++) s += HEX[v[i]!]!;
    return s as VllmBlockHash;
  }
  return null;
}

/**
 * vLLM hashes a block against NONE_HASH when `not parent_block_hash`, so a falsy parent means "no parent".
 * Real vLLM sends nil; llm-d-inference-sim sends 0 in array mode.
 */
export function isNoParent(v: unknown): boolean {
  return v === null || v === undefined || v === 0 || v === 0n;
}
