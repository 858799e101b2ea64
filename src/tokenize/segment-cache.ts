// LRU cache of text segments' tokens, keyed by content hash and bounded by bytes.
import { createHash } from 'node:crypto';

/**
 * LRU cache of the tokens of text segments (the text between special tokens), bounded by bytes.
 *
 * Keys are content hashes, not the text, plus the length: SHA-1 of the UTF-8 for long segments, two
 * independent 32-bit hashes (FNV-1a and a murmur-style mix) for short ones. A false hit needs the same length
 * and a 64-bit (short) or 160-bit (long) collision.
 * Cost counted per entry: 4 bytes per token (stored as Uint32Array) + the key + a fixed overhead.
 * A Map keeps insertion order, so re-inserting on a hit makes it an LRU with O(1) operations.
 */

/**
 * What an entry costs beyond its tokens and key characters, bytes: the Map's slot, the key string and the
 * Uint32Array with its ArrayBuffer objects on V8's heap. Measured ~350 bytes an entry
 * (bench/debug/segment-cache-cost.ts); 96, the guess before, let the caches take twice their budget in an
 * hour's soak of short questions.
 */
const ENTRY_OVERHEAD_BYTES = 320;
/** An entry larger than this share of the budget is not cached (one huge prompt would flush the rest). */
export const MAX_ENTRY_SHARE = 1 / 16;
/** Entries at most, whatever their bytes (a flood of tiny segments costs Map slots the estimate misses). */
export const DEFAULT_MAX_ENTRIES = 200_000;

/** Segments at least this long are keyed by SHA-1 (native, ~1 GB/s); shorter ones by the JS hash below. */
export const NATIVE_HASH_MIN_CHARS = 2048;

export function segmentKey(text: string, atStart: boolean): string {
  const end = atStart ? '^' : '';
  // A 100k-token context is ~500k characters hashed on every request; the JS loop over UTF-16 units cost
  // 5-10x native SHA-1 over UTF-8. UTF-8 maps a lone surrogate and U+FFFD alike, so such text keeps the JS hash.
  if (text.length >= NATIVE_HASH_MIN_CHARS && isWellFormed(text))
    return `${text.length.toString(36)}:${createHash('sha1').update(text, 'utf8').digest('base64')}${end}`;
  return `${text.length.toString(36)}.${utf16Hash(text)}${end}`;
}

const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Two independent 32-bit hashes (FNV-1a and a murmur-style mix) over the UTF-16 code units, in one pass. */
function utf16Hash(text: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x9747b28c ^ text.length;
  // A segment is a slice of the rendered prompt, whose representation (sliced, two-byte, from a rope) varies
  // per request; charCodeAt over such strings ran ~10x slower than over a flat one in the router. One native
  // copy into UTF-16 code units gives the same values through a monomorphic typed array.
  const b = Buffer.from(text, 'utf16le');
  const units = new Uint16Array(b.buffer, b.byteOffset, b.length >>> 1);
  for (let i = 0; i < units.length; i++) {
    const c = units[i]!;
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995);
    h2 ^= h2 >>> 15;
  }
  return `${(h1 >>> 0).toString(36)}.${(h2 >>> 0).toString(36)}`;
}

export interface SegmentCacheStats {
  entries: number;
  bytes: number;
  hits: number;
  misses: number;
  evictions: number;
}

export class SegmentCache {
  readonly maxBytes: number;
  readonly maxEntries: number;
  readonly #map = new Map<string, Uint32Array>();
  #bytes = 0;
  #hits = 0;
  #misses = 0;
  #evictions = 0;

  constructor(maxBytes: number, maxEntries: number = DEFAULT_MAX_ENTRIES) {
    if (!Number.isFinite(maxBytes) || maxBytes < 0)
      throw new RangeError(`maxBytes must be >= 0, got ${maxBytes}`);
    if (!Number.isInteger(maxEntries) || maxEntries < 0)
      throw new RangeError(`maxEntries must be a whole number >= 0, got ${maxEntries}`);
    this.maxBytes = maxBytes;
    this.maxEntries = maxEntries;
  }

  static entryBytes(key: string, tokens: Uint32Array): number {
    return tokens.byteLength + key.length * 2 + ENTRY_OVERHEAD_BYTES;
  }

  get(key: string): Uint32Array | undefined {
    const v = this.#map.get(key);
    if (v === undefined) {
      this.#misses++;
      return undefined;
    }
    this.#hits++;
    this.#map.delete(key);
    this.#map.set(key, v);
    return v;
  }

  /** Stores unless the entry alone exceeds MAX_ENTRY_SHARE of the budget (it would flush everything else). */
  set(key: string, tokens: Uint32Array): void {
    const cost = SegmentCache.entryBytes(key, tokens);
    if (cost > this.maxBytes * MAX_ENTRY_SHARE || this.maxEntries === 0) return;
    const old = this.#map.get(key);
    if (old !== undefined) {
      this.#map.delete(key);
      this.#bytes -= SegmentCache.entryBytes(key, old);
    }
    this.#map.set(key, tokens);
    this.#bytes += cost;
    while (this.#bytes > this.maxBytes || this.#map.size > this.maxEntries) {
      const oldest = this.#map.keys().next();
      if (oldest.done) break;
      const k = oldest.value;
      const v = this.#map.get(k);
      this.#map.delete(k);
      if (v !== undefined) this.#bytes -= SegmentCache.entryBytes(k, v);
      this.#evictions++;
    }
  }

  stats(): SegmentCacheStats {
    return {
      entries: this.#map.size,
      bytes: this.#bytes,
      hits: this.#hits,
      misses: this.#misses,
      evictions: this.#evictions,
    };
  }
}
