// The chained 64-bit block keys the router and the collector both compute from token ids.
import type { BlockKey } from './types.js';

/**
 * The chained 64-bit block key shared by the router and the collector (docs/architecture.md#block-keys):
 *   key₀ = H(seed, tokens₀), keyᵢ = H(keyᵢ₋₁, tokensᵢ)
 * H is MurmurHash3-x86-128's block mix on two 32-bit lanes, truncated to 64 bits. Everything stays in
 * int32 arithmetic (Math.imul): no BigInt in the per-token loop.
 * Changing this function changes every key in every index: bump KEY_SCHEME_VERSION with it.
 */
export const KEY_SCHEME_VERSION = 1;

const C1 = 0x239b961b;
const C2 = 0xab0e9789;
const C3 = 0x38b34ae5;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

/** Hashes tokens[start, end) under the parent (hi, lo) and writes the result to out[0..1]. */
function hashBlock(
  hi: number,
  lo: number,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
  out: Uint32Array,
): void {
  let h1 = lo ^ 0x9e3779b9;
  let h2 = hi ^ 0x7f4a7c15;
  for (let i = start; i < end; i++) {
    let k = tokens[i]! | 0;
    let k1 = Math.imul(k, C1);
    k1 = rotl(k1, 15);
    k1 = Math.imul(k1, C2);
    h1 ^= k1;
    h1 = rotl(h1, 19);
    h1 = (h1 + h2) | 0;
    h1 = (Math.imul(h1, 5) + 0x561ccd1b) | 0;
    k = Math.imul(k, C2);
    k = rotl(k, 16);
    k = Math.imul(k, C3);
    h2 ^= k;
    h2 = rotl(h2, 17);
    h2 = (h2 + h1) | 0;
    h2 = (Math.imul(h2, 5) + 0x0bcaa747) | 0;
  }
  const n = end - start;
  h1 ^= n;
  h2 ^= n;
  h1 = (h1 + h2) | 0;
  h2 = (h2 + h1) | 0;
  h1 = fmix(h1);
  h2 = fmix(h2);
  h1 = (h1 + h2) | 0;
  h2 = (h2 + h1) | 0;
  out[0] = h1;
  out[1] = h2;
}

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

function wordHex(w: number): string {
  return HEX[(w >>> 24) & 255]! + HEX[(w >>> 16) & 255]! + HEX[(w >>> 8) & 255]! + HEX[w & 255]!;
}

export function keyFromWords(hi: number, lo: number): BlockKey {
  return (wordHex(hi) + wordHex(lo)) as BlockKey;
}

export function keyToWords(key: BlockKey): [number, number] {
  return [parseInt(key.slice(0, 8), 16) | 0, parseInt(key.slice(8, 16), 16) | 0];
}

export function isBlockKey(s: string): s is BlockKey {
  return /^[0-9a-f]{16}$/.test(s);
}

/** UTF-8 bytes → tokens-like array, so strings go through the same mixing function as token ids. */
function stringWords(s: string): Int32Array {
  const bytes = new TextEncoder().encode(s);
  const words = new Int32Array(Math.ceil(bytes.length / 4) + 1);
  words[0] = bytes.length;
  for (let i = 0; i < bytes.length; i++) words[1 + (i >> 2)]! |= bytes[i]! << ((i & 3) * 8);
  return words;
}

export interface KeySeedInput {
  model: string;
  lora?: string | null;
  cacheSalt?: string | null;
}

/**
 * The seed of a key chain. Model, LoRA adapter and cache_salt each change every key of the chain, just as
 * vLLM's own extra_keys (LoRA name on every block, cache_salt on the first) change every block hash.
 */
export function keySeed({ model, lora, cacheSalt }: KeySeedInput): BlockKey {
  const out = new Uint32Array(2);
  let hi = 0x6b696e66; // "kinf"
  let lo = KEY_SCHEME_VERSION;
  for (const part of [model, lora ?? '', cacheSalt ?? '']) {
    const w = stringWords(part);
    hashBlock(hi, lo, w, 0, w.length, out);
    hi = out[0]! | 0;
    lo = out[1]! | 0;
  }
  return keyFromWords(hi, lo);
}

/**
 * Keys of every FULL block of `tokens` (a trailing partial block has no key, as in vLLM), chained from
 * `parent` (the seed for block 0, or the key of the block before `tokens[0]`).
 * `maxBlocks` caps the work for very long prompts.
 */
export function blockKeys(
  tokens: ArrayLike<number>,
  blockSize: number,
  parent: BlockKey,
  maxBlocks = Number.POSITIVE_INFINITY,
): BlockKey[] {
  return chainFrom(tokens, 0, [], blockSize, parent, maxBlocks);
}

/** Appends to `keys` the keys of the full blocks from block `first` on, chained from `parent`. */
function chainFrom(
  tokens: ArrayLike<number>,
  first: number,
  keys: BlockKey[],
  blockSize: number,
  parent: BlockKey,
  maxBlocks = Number.POSITIVE_INFINITY,
): BlockKey[] {
  if (!Number.isInteger(blockSize) || blockSize <= 0)
    throw new RangeError(`block size must be a positive integer, got ${blockSize}`);
  const n = Math.min(Math.floor(tokens.length / blockSize), maxBlocks);
  const out = new Uint32Array(2);
  let [hi, lo] = keyToWords(parent);
  for (let b = first; b < n; b++) {
    hashBlock(hi, lo, tokens, b * blockSize, (b + 1) * blockSize, out);
    hi = out[0]! | 0;
    lo = out[1]! | 0;
    keys.push(keyFromWords(hi, lo));
  }
  return keys;
}

interface Chain {
  seed: BlockKey;
  blockSize: number;
  tokens: ArrayLike<number>;
  keys: readonly BlockKey[];
}

/**
 * The last prompts' tokens and keys, so a prompt that extends one of them (a new turn on a known context, the
 * same body again) hashes only the blocks after their common prefix: comparing 100k token ids costs a tenth
 * of hashing them. Holds at most `maxTokens` tokens over at most `maxChains` prompts (least recent dropped).
 * Equal to blockKeys(tokens, blockSize, seed) for every input (property-tested); the token arrays given must
 * not be changed afterwards (they are kept, not copied).
 */
export class ChainMemo {
  readonly #chains: Chain[] = [];
  #held = 0;

  constructor(
    readonly maxTokens: number,
    readonly maxChains = 16,
  ) {}

  keys(tokens: ArrayLike<number>, blockSize: number, seed: BlockKey): BlockKey[] {
    const blocks = Math.floor(tokens.length / blockSize);
    let best = -1;
    let shared = 0;
    for (let c = 0; c < this.#chains.length; c++) {
      const e = this.#chains[c]!;
      if (e.seed !== seed || e.blockSize !== blockSize) continue;
      const limit = Math.min(e.keys.length, blocks) * blockSize;
      if (limit <= shared * blockSize) continue;
      const et = e.tokens;
      let i = 0;
      if (shared > 0) {
        // Keys chain their whole prefix: a chain whose key at the best's last shared block differs from the
        // best's differs from the prompt before it, and one whose key is the same needs comparing only after
        // it. Recent prompts often share a long system prompt: scanning it again for each cost a 16k-token
        // decision ~1 ms (16 chains × 15k ids).
        if (e.keys[shared - 1] !== this.#chains[best]!.keys[shared - 1]) continue;
        i = shared * blockSize;
      }
      // The same array (the tokenizer's whole-prompt memo hands a long prompt's frozen array out again).
      if (et === tokens) i = limit;
      else while (i < limit && et[i] === tokens[i]) i++;
      const b = Math.floor(i / blockSize);
      if (b > shared) {
        shared = b;
        best = c;
      }
    }
    const keys =
      best < 0
        ? blockKeys(tokens, blockSize, seed)
        : chainFrom(
            tokens,
            shared,
            this.#chains[best]!.keys.slice(0, shared),
            blockSize,
            this.#chains[best]!.keys[shared - 1]!,
          );
    // The prompt replaces a chain it extends (the conversation grew), else joins as the most recent.
    if (best >= 0 && shared === this.#chains[best]!.keys.length) this.#drop(best);
    this.#chains.unshift({ seed, blockSize, tokens, keys: keys.slice() });
    this.#held += tokens.length;
    while (this.#chains.length > 1 && (this.#held > this.maxTokens || this.#chains.length > this.maxChains))
      this.#drop(this.#chains.length - 1);
    if (this.#held > this.maxTokens) this.#drop(0);
    return keys;
  }

  #drop(c: number): void {
    this.#held -= this.#chains[c]!.tokens.length;
    this.#chains.splice(c, 1);
  }
}
