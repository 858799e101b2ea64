// vLLM V1's KVCacheManager for the emulator: per-request block tables, prefix hits, KV events.
import { BlockPool, type KvBlock } from './block-pool.js';
import type { EngineRequest } from './request.js';
import type { BlockStoredEvent, EngineBlockHash, ExtraKeys, KvCacheEvent } from './types.js';

export interface ComputedBlocks {
  blocks: KvBlock[];
  numTokens: number;
}

const NO_HIT: ComputedBlocks = { blocks: [], numTokens: 0 };

/**
 * BlockStored events that re-announce a prefix hit (kv_cache_report_mode "full") rather than store blocks.
 * On the wire they are ordinary BlockStored events and nothing in them tells them apart, so the emulator's own
 * checks, which compare the event stream with the pool, ask here instead of reading an extra field.
 */
const reannouncements = new WeakSet<KvCacheEvent>();

/** True for a "full" report mode re-announcement (a BlockStored with no matching change in the pool). */
export function isCachedBlockReannouncement(e: KvCacheEvent): boolean {
  return reannouncements.has(e);
}

/**
 * vLLM V1 KVCacheManager + single full-attention group manager (kv_cache_manager.py,
 * single_type_kv_cache_manager.py): per-request block tables, prefix hits, slot allocation with
 * caching at allocation time, and freeing in reverse order.
 */
export class KvCacheManager {
  readonly pool: BlockPool;
  readonly #reqBlocks = new Map<string, KvBlock[]>();
  readonly #numCachedBlocks = new Map<string, number>();

  constructor(
    numGpuBlocks: number,
    readonly blockSize: number,
    readonly maxModelLen: number,
  ) {
    this.pool = new BlockPool(numGpuBlocks);
  }

  /**
   * Longest run of cached blocks from block 0, capped so the last prompt token is always recomputed. With
   * kv_cache_report_mode "full", a hit is re-announced (vLLM BlockPool.emit_cached_block_events) every time the
   * scheduler looks the request up, including retries after a failed allocation and after a preemption.
   */
  getComputedBlocks(req: EngineRequest): ComputedBlocks {
    if (req.skipPrefixCache) return NO_HIT;
    const maxHitBlocks = Math.floor((req.numTokens - 1) / this.blockSize);
    const hashes = req.blockHashes;
    const blocks: KvBlock[] = [];
    for (let i = 0; i < maxHitBlocks && i < hashes.length; i++) {
      const b = this.pool.getCachedBlock(hashes[i] as EngineBlockHash);
      if (b === null) break;
      blocks.push(b);
    }
    if (blocks.length === 0) return NO_HIT;
    if (req.kvCacheReportMode === 'full') this.#emitCachedBlockEvents(req, blocks.length);
    return { blocks, numTokens: blocks.length * this.blockSize };
  }

  /**
   * One BlockStored for hit blocks [0, n), shaped as an ordinary store (so parent null). It only reports: no
   * refcount, LRU position or hash-map change, so subscribers that learn from it see no matching removal.
   */
  #emitCachedBlockEvents(req: EngineRequest, numCachedBlocks: number): void {
    const e = this.#storedEvent(req, 0, numCachedBlocks);
    reannouncements.add(e);
    this.pool.pushEvent(e);
  }

  blocksOf(requestId: string): readonly KvBlock[] {
    return this.#reqBlocks.get(requestId) ?? [];
  }

  /**
   * Allocates blocks for `numNewTokens` more tokens (after any new prefix hit), or returns null when the
   * pool cannot supply them (or, with `fullSequenceMustFit`, the blocks for all of the request's tokens).
   * Newly full blocks are cached immediately (BlockStored), before the forward pass.
   */
  allocateSlots(
    req: EngineRequest,
    numNewTokens: number,
    hit: ComputedBlocks = NO_HIT,
    fullSequenceMustFit = false,
  ): KvBlock[] | null {
    if (numNewTokens <= 0) throw new Error('allocateSlots needs numNewTokens > 0');
    const numComputed = req.numComputedTokens + hit.numTokens;
    const numNeedSlot = Math.min(numComputed + numNewTokens, this.maxModelLen);
    const have = this.#reqBlocks.get(req.id) ?? [];
    const blocksToAllocate = (numTokens: number): number =>
      Math.max(0, Math.ceil(numTokens / this.blockSize) - hit.blocks.length - have.length);
    const numNew = blocksToAllocate(numNeedSlot);
    // A hit on a free cached block takes it out of the free queue, so it costs a free block too.
    let evictableHits = 0;
    for (const b of hit.blocks) if (b.refCnt === 0) evictableHits++;
    // vLLM's scheduler_reserve_full_isl (default on): admit only if the whole sequence fits, not just
    // this chunk, so a long prompt does not prefill a few chunks and then preempt itself.
    if (
      fullSequenceMustFit &&
      blocksToAllocate(Math.min(req.numTokens, this.maxModelLen)) + evictableHits > this.pool.numFreeBlocks
    )
      return null;
    if (numNew + evictableHits > this.pool.numFreeBlocks) return null;

    let blocks = this.#reqBlocks.get(req.id);
    if (blocks === undefined) {
      blocks = [];
      this.#reqBlocks.set(req.id, blocks);
      this.#numCachedBlocks.set(req.id, 0);
    }
    if (hit.blocks.length > 0) {
      this.pool.touch(hit.blocks);
      blocks.push(...hit.blocks);
      this.#numCachedBlocks.set(req.id, blocks.length);
    }
    const fresh = this.pool.getNewBlocks(numNew);
    blocks.push(...fresh);
    this.#cacheFullBlocks(req, blocks, Math.min(numComputed + numNewTokens, req.numTokens));
    return fresh;
  }

  /** vLLM BlockPool.cache_full_blocks: one BlockStored per request per step for the newly full run. */
  #cacheFullBlocks(req: EngineRequest, blocks: KvBlock[], numTokensToCache: number): void {
    const numCached = this.#numCachedBlocks.get(req.id) ?? 0;
    const numFull = Math.floor(numTokensToCache / this.blockSize);
    if (numCached >= numFull) return;
    const hashes = req.blockHashes as readonly EngineBlockHash[];
    for (let i = numCached; i < numFull; i++)
      this.pool.cacheBlock(blocks[i] as KvBlock, hashes[i] as EngineBlockHash);
    this.pool.pushEvent(this.#storedEvent(req, numCached, numFull));
    this.#numCachedBlocks.set(req.id, numFull);
  }

  /** The BlockStored vLLM builds for a request's full blocks [start, end): hashes, tokens, extra keys. */
  #storedEvent(req: EngineRequest, start: number, end: number): BlockStoredEvent {
    const hashes = req.blockHashes as readonly EngineBlockHash[];
    const extraKeys: (ExtraKeys | null)[] = [];
    for (let i = start; i < end; i++) extraKeys.push(req.hasher.extraKeys(i));
    return {
      type: 'BlockStored',
      blockHashes: hashes.slice(start, end),
      parentBlockHash: start === 0 ? null : (hashes[start - 1] as EngineBlockHash),
      tokenIds: req.allTokenIds.slice(start * this.blockSize, end * this.blockSize),
      blockSize: this.blockSize,
      loraId: req.loraId,
      loraName: req.loraName,
      extraKeys,
    };
  }

  /** Frees a request's blocks, tail first, so prefix heads stay cached longest. */
  free(req: EngineRequest): void {
    const blocks = this.#reqBlocks.get(req.id);
    if (blocks === undefined) return;
    this.#reqBlocks.delete(req.id);
    this.#numCachedBlocks.delete(req.id);
    this.pool.freeBlocks([...blocks].reverse());
  }

  /** Sum of block references held by live requests, per block id (for invariant checks). */
  referenceCounts(): Map<number, number> {
    const out = new Map<number, number>();
    for (const blocks of this.#reqBlocks.values())
      for (const b of blocks) out.set(b.id, (out.get(b.id) ?? 0) + 1);
    return out;
  }
}
