import { BlockPool, type KvBlock } from './block-pool.js';
import type { EngineRequest } from './request.js';
import type { EngineBlockHash } from './types.js';

export interface ComputedBlocks {
  blocks: KvBlock[];
  numTokens: number;
}

const NO_HIT: ComputedBlocks = { blocks: [], numTokens: 0 };

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

  /** Longest run of cached blocks from block 0, capped so the last prompt token is always recomputed. */
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
    return blocks.length === 0 ? NO_HIT : { blocks, numTokens: blocks.length * this.blockSize };
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
    const newHashes: EngineBlockHash[] = [];
    const extraKeys = [];
    for (let i = numCached; i < numFull; i++) {
      const h = hashes[i] as EngineBlockHash;
      this.pool.cacheBlock(blocks[i] as KvBlock, h);
      newHashes.push(h);
      extraKeys.push(req.hasher.extraKeys(i));
    }
    this.pool.pushEvent({
      type: 'BlockStored',
      blockHashes: newHashes,
      parentBlockHash: numCached === 0 ? null : (hashes[numCached - 1] as EngineBlockHash),
      tokenIds: req.allTokenIds.slice(numCached * this.blockSize, numFull * this.blockSize),
      blockSize: this.blockSize,
      loraId: req.loraId,
      loraName: req.loraName,
      extraKeys,
    });
    this.#numCachedBlocks.set(req.id, numFull);
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
