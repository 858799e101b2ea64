// The per-pod map from vLLM block hash to our block key and per-tier store counts, LRU-bounded.
import type { BlockKey, Tier, VllmBlockHash } from '../core/types.js';

/**
 * What we know about one vLLM block hash on one pod: our key for it (null: known, but not indexable, e.g.
 * multimodal) and how many stores of it per tier are in the index — vLLM may store a hash twice and remove
 * it once, and the index refcounts, so we mirror the counts to translate removals and evictions exactly.
 */
export interface BlockEntry {
  key: BlockKey | null;
  /** Counts are valid only while gen equals the map's generation (a pod clear bumps it: O(1) reset). */
  gen: number;
  gpu: number;
  cpu: number;
  storage: number;
}

const FIELD: Record<Tier, 'gpu' | 'cpu' | 'storage'> = { GPU: 'gpu', CPU: 'cpu', STORAGE: 'storage' };

/** Per-pod map vLLM hash → BlockEntry, bounded by entries with LRU eviction (JS Map keeps insertion order). */
export class BlockMap {
  readonly #map = new Map<VllmBlockHash, BlockEntry>();
  #gen = 0;

  constructor(readonly maxEntries: number) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1)
      throw new RangeError(`maxEntries must be ≥ 1, got ${maxEntries}`);
  }

  get size(): number {
    return this.#map.size;
  }

  /** Looks up and marks as recently used. */
  touch(hash: VllmBlockHash): BlockEntry | undefined {
    const e = this.#map.get(hash);
    if (e !== undefined) {
      this.#map.delete(hash);
      this.#map.set(hash, e);
    }
    return e;
  }

  peek(hash: VllmBlockHash): BlockEntry | undefined {
    return this.#map.get(hash);
  }

  /** Inserts a fresh entry; returns the entries evicted to stay within the bound (oldest first). */
  insert(hash: VllmBlockHash, key: BlockKey | null): { entry: BlockEntry; evicted: BlockEntry[] } {
    const entry: BlockEntry = { key, gen: this.#gen, gpu: 0, cpu: 0, storage: 0 };
    this.#map.delete(hash);
    this.#map.set(hash, entry);
    const evicted: BlockEntry[] = [];
    while (this.#map.size > this.maxEntries) {
      const oldest = this.#map.keys().next().value as VllmBlockHash;
      evicted.push(this.#map.get(oldest)!);
      this.#map.delete(oldest);
    }
    return { entry, evicted };
  }

  delete(hash: VllmBlockHash): void {
    this.#map.delete(hash);
  }

  count(e: BlockEntry, tier: Tier): number {
    return e.gen === this.#gen ? e[FIELD[tier]] : 0;
  }

  /** Adds `delta` to the entry's count in `tier` (resetting stale counts first). */
  add(e: BlockEntry, tier: Tier, delta: number): void {
    if (e.gen !== this.#gen) {
      e.gen = this.#gen;
      e.gpu = e.cpu = e.storage = 0;
    }
    e[FIELD[tier]] += delta;
  }

  held(e: BlockEntry): boolean {
    return e.gen === this.#gen && e.gpu + e.cpu + e.storage > 0;
  }

  /** The index forgot this pod's blocks (a clear): every count is now zero; hash → key facts stay. */
  forgetCounts(): void {
    this.#gen++;
  }

  clear(): void {
    this.#map.clear();
    this.#gen++;
  }

  /** Every entry, least recently used first; read its counts with count(). */
  entries(): IterableIterator<[VllmBlockHash, BlockEntry]> {
    return this.#map.entries();
  }
}
