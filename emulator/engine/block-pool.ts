// vLLM V1's BlockPool for the emulator: KV blocks, the LRU free queue, the prefix-cache hash map.
import type { EngineBlockHash, KvCacheEvent } from './types.js';

/**
 * vLLM V1's BlockPool (vllm/v1/core/block_pool.py) for one full-attention KV cache group:
 * - a doubly linked free queue in LRU order (evict from the front);
 * - cached blocks stay in the hash map while free ("free but hit-able") and are evicted only when
 *   re-allocated, which is when BlockRemoved is emitted;
 * - block 0 is vLLM's null block and never used, so usable capacity is numGpuBlocks − 1.
 */

export class KvBlock {
  refCnt = 0;
  hash: EngineBlockHash | null = null;
  prev: KvBlock | null = null;
  next: KvBlock | null = null;
  inFreeQueue = false;
  constructor(readonly id: number) {}
}

/** O(1) remove-from-middle queue; the head is the next block to (re)use. */
class FreeBlockQueue {
  readonly #head = new KvBlock(-1);
  readonly #tail = new KvBlock(-2);
  size = 0;

  constructor() {
    this.#head.next = this.#tail;
    this.#tail.prev = this.#head;
  }

  #insertAfter(at: KvBlock, b: KvBlock): void {
    b.prev = at;
    b.next = at.next;
    (at.next as KvBlock).prev = b;
    at.next = b;
    b.inFreeQueue = true;
    this.size++;
  }

  append(b: KvBlock): void {
    this.#insertAfter(this.#tail.prev as KvBlock, b);
  }

  prepend(b: KvBlock): void {
    this.#insertAfter(this.#head, b);
  }

  remove(b: KvBlock): void {
    (b.prev as KvBlock).next = b.next;
    (b.next as KvBlock).prev = b.prev;
    b.prev = b.next = null;
    b.inFreeQueue = false;
    this.size--;
  }

  popLeft(): KvBlock {
    const b = this.#head.next as KvBlock;
    if (b === this.#tail) throw new Error('free block queue is empty');
    this.remove(b);
    return b;
  }

  *[Symbol.iterator](): Generator<KvBlock> {
    for (let b = this.#head.next; b !== null && b !== this.#tail; b = b.next) yield b;
  }
}

export class BlockPool {
  readonly blocks: KvBlock[];
  readonly nullBlock: KvBlock;
  readonly #free = new FreeBlockQueue();
  /** hash → blocks holding it (vLLM allows two physical blocks with one hash, e.g. a recomputed last block). */
  readonly #cached = new Map<EngineBlockHash, KvBlock[]>();
  #events: KvCacheEvent[] = [];

  constructor(readonly numGpuBlocks: number) {
    if (!Number.isInteger(numGpuBlocks) || numGpuBlocks < 2) throw new RangeError('numGpuBlocks must be ≥ 2');
    this.blocks = Array.from({ length: numGpuBlocks }, (_, i) => new KvBlock(i));
    for (const b of this.blocks) this.#free.append(b);
    this.nullBlock = this.#free.popLeft();
  }

  get numFreeBlocks(): number {
    return this.#free.size;
  }

  /** Usable blocks (all but the null block). */
  get capacity(): number {
    return this.numGpuBlocks - 1;
  }

  /** vllm:kv_cache_usage_perc: cached-but-unreferenced blocks count as free. */
  get usage(): number {
    return 1 - this.#free.size / this.capacity;
  }

  getCachedBlock(hash: EngineBlockHash): KvBlock | null {
    const list = this.#cached.get(hash);
    return list === undefined ? null : (list[0] as KvBlock);
  }

  /** Marks hits as in use: a free cached block leaves the free queue. */
  touch(blocks: readonly KvBlock[]): void {
    for (const b of blocks) {
      if (b.refCnt === 0) this.#free.remove(b);
      b.refCnt++;
    }
  }

  /** Pops n blocks from the LRU head, evicting (BlockRemoved) any that still hold a cached hash. */
  getNewBlocks(n: number): KvBlock[] {
    if (n > this.#free.size)
      throw new Error(`cannot get ${n} free blocks from the pool (${this.#free.size} free)`);
    const out: KvBlock[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const b = this.#free.popLeft();
      if (b.hash !== null) this.#evict(b);
      b.refCnt = 1;
      out[i] = b;
    }
    return out;
  }

  #evict(b: KvBlock): void {
    const hash = b.hash as EngineBlockHash;
    const list = this.#cached.get(hash);
    if (list !== undefined) {
      const i = list.indexOf(b);
      if (i >= 0) list.splice(i, 1);
      if (list.length === 0) this.#cached.delete(hash);
    }
    b.hash = null;
    this.#events.push({ type: 'BlockRemoved', blockHashes: [hash] });
  }

  /** Gives blocks a hash and makes them hit-able; the caller emits the BlockStored event. */
  cacheBlock(b: KvBlock, hash: EngineBlockHash): void {
    if (b.hash !== null) throw new Error(`block ${b.id} is already cached`);
    b.hash = hash;
    const list = this.#cached.get(hash);
    if (list === undefined) this.#cached.set(hash, [b]);
    else list.push(b);
  }

  /**
   * Releases blocks given in eviction order (callers pass a request's blocks reversed, so tail blocks
   * are evicted first). Unhashed blocks go to the front (reused first), cached ones to the back.
   */
  freeBlocks(ordered: readonly KvBlock[]): void {
    for (const b of ordered) {
      b.refCnt--;
      if (b.refCnt < 0) throw new Error(`block ${b.id} freed twice`);
      if (b.refCnt === 0 && b !== this.nullBlock) {
        if (b.hash === null) this.#free.prepend(b);
        else this.#free.append(b);
      }
    }
  }

  /** vLLM reset_prefix_cache: only when no block is in use; queues AllBlocksCleared for the next step's batch. */
  resetPrefixCache(): boolean {
    if (this.#free.size !== this.capacity) return false;
    this.#cached.clear();
    for (const b of this.blocks) b.hash = null;
    this.#events.push({ type: 'AllBlocksCleared' });
    return true;
  }

  pushEvent(e: KvCacheEvent): void {
    this.#events.push(e);
  }

  get pendingEventCount(): number {
    return this.#events.length;
  }

  takeEvents(): KvCacheEvent[] {
    const e = this.#events;
    this.#events = [];
    return e;
  }

  /** Multiset of cached hashes (in use or free), for invariant checks. */
  cachedHashCounts(): Map<EngineBlockHash, number> {
    const out = new Map<EngineBlockHash, number>();
    for (const [h, list] of this.#cached) out.set(h, list.length);
    return out;
  }

  freeQueueIds(): number[] {
    return [...this.#free].map((b) => b.id);
  }
}
