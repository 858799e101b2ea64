// The emulated engine's own block hash, modelled on vLLM's sha256_cbor prefix-caching hash.
import { createHash, randomBytes } from 'node:crypto';
import type { EngineBlockHash, ExtraKeys } from './types.js';

/**
 * The emulator's own engine block hash, modelled on vLLM's `sha256_cbor` prefix-caching hash
 * (vllm.md §3.2–3.3): hashᵢ = sha256(cbor([parentᵢ₋₁ or NONE_HASH, tokensᵢ, extra_keysᵢ or None])).
 * This is vLLM's algorithm, not the router's block-key function: the router must treat these hashes as
 * opaque, exactly as with a real vLLM pod. Pinned by the test vector in spec/01-unit/emulator/block-hash.spec.ts.
 */

/** vLLM's `--prefix-caching-hash-algo` name for this hash, as cache_config_info reports it. */
export const ENGINE_HASH_ALGO = 'sha256_cbor';

/** Canonical CBOR for the few types the hash input uses: unsigned ints, byte strings, text, arrays, null. */
class CborWriter {
  #buf: Buffer = Buffer.allocUnsafe(256);
  #len = 0;

  #ensure(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#len + n));
    this.#buf.copy(next, 0, 0, this.#len);
    this.#buf = next;
  }

  /** Major type + argument in the shortest form (RFC 8949 §4.2.1 "preferred serialization"). */
  head(major: number, n: number): void {
    const m = major << 5;
    this.#ensure(9);
    const b = this.#buf;
    if (n < 24) b[this.#len++] = m | n;
    else if (n < 0x100) {
      b[this.#len++] = m | 24;
      b[this.#len++] = n;
    } else if (n < 0x10000) {
      b[this.#len++] = m | 25;
      b.writeUInt16BE(n, this.#len);
      this.#len += 2;
    } else if (n < 0x100000000) {
      b[this.#len++] = m | 26;
      b.writeUInt32BE(n, this.#len);
      this.#len += 4;
    } else {
      b[this.#len++] = m | 27;
      b.writeBigUInt64BE(BigInt(n), this.#len);
      this.#len += 8;
    }
  }

  uint(n: number): void {
    if (n >= 0) this.head(0, n);
    else this.head(1, -1 - n);
  }

  bytes(data: Uint8Array): void {
    this.head(2, data.length);
    this.#ensure(data.length);
    this.#buf.set(data, this.#len);
    this.#len += data.length;
  }

  text(s: string): void {
    const data = Buffer.from(s, 'utf8');
    this.head(3, data.length);
    this.#ensure(data.length);
    this.#buf.set(data, this.#len);
    this.#len += data.length;
  }

  nil(): void {
    this.#ensure(1);
    this.#buf[this.#len++] = 0xf6;
  }

  reset(): void {
    this.#len = 0;
  }

  view(): Buffer {
    return this.#buf.subarray(0, this.#len);
  }
}

const writer = new CborWriter();

function sha256(data: Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

/** vLLM `init_none_hash`: sha256_cbor(PYTHONHASHSEED string) when a seed is set. */
export function noneHashFromSeed(hashSeed: string): Buffer {
  writer.reset();
  writer.text(hashSeed);
  return sha256(writer.view());
}

/** vLLM without PYTHONHASHSEED: os.urandom(32), so hashes differ across pods and restarts. */
export function randomNoneHash(): Buffer {
  return randomBytes(32);
}

/** One block's hash from its parent digest (NONE_HASH for block 0), its tokens and its extra keys. */
export function hashBlockTokens(
  parent: Uint8Array,
  tokens: readonly number[],
  start: number,
  end: number,
  extraKeys: ExtraKeys | null,
): Buffer {
  writer.reset();
  writer.head(4, 3);
  writer.bytes(parent);
  writer.head(4, end - start);
  for (let i = start; i < end; i++) writer.uint(tokens[i] as number);
  if (extraKeys === null) writer.nil();
  else {
    writer.head(4, extraKeys.length);
    for (const k of extraKeys) writer.text(k);
  }
  return sha256(writer.view());
}

/**
 * vLLM `generate_block_hash_extra_keys` for the inputs we model: LoRA name on every block, then cache_salt
 * on the first block only (order: lora, mm, cache_salt, prompt_embeds).
 */
export function blockExtraKeys(
  blockIndex: number,
  loraName: string | null,
  cacheSalt: string | null,
): ExtraKeys | null {
  const keys: string[] = [];
  if (loraName !== null) keys.push(loraName);
  if (blockIndex === 0 && cacheSalt !== null) keys.push(cacheSalt);
  return keys.length === 0 ? null : keys;
}

export function toEngineBlockHash(digest: Uint8Array): EngineBlockHash {
  return Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength).toString('hex') as EngineBlockHash;
}

/** The value vLLM puts on the wire with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1: low 64 bits, big-endian. */
export function blockHashToU64(hash: EngineBlockHash): bigint {
  return BigInt(`0x${hash.slice(-16)}`);
}

export function blockHashToBytes(hash: EngineBlockHash): Buffer {
  return Buffer.from(hash, 'hex');
}

/**
 * Incremental block hasher for one request (vLLM `get_request_block_hasher`): hashes every full block of
 * the request's tokens as they grow, chaining from NONE_HASH.
 */
export class RequestBlockHasher {
  readonly hashes: EngineBlockHash[] = [];
  #lastDigest: Buffer;

  constructor(
    private readonly noneHash: Buffer,
    private readonly blockSize: number,
    private readonly loraName: string | null,
    private readonly cacheSalt: string | null,
  ) {
    this.#lastDigest = noneHash;
  }

  /** Hashes any newly completed full blocks of `tokens` (which only ever grows). */
  update(tokens: readonly number[]): void {
    const full = Math.floor(tokens.length / this.blockSize);
    for (let i = this.hashes.length; i < full; i++) {
      const start = i * this.blockSize;
      const digest = hashBlockTokens(
        i === 0 ? this.noneHash : this.#lastDigest,
        tokens,
        start,
        start + this.blockSize,
        blockExtraKeys(i, this.loraName, this.cacheSalt),
      );
      this.#lastDigest = digest;
      this.hashes.push(toEngineBlockHash(digest));
    }
  }

  extraKeys(blockIndex: number): ExtraKeys | null {
    return blockExtraKeys(blockIndex, this.loraName, this.cacheSalt);
  }
}
