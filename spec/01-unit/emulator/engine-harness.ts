import { blockHashToU64, RequestBlockHasher } from '../../../emulator/engine/block-hash.js';
import { Engine, type EngineOptions } from '../../../emulator/engine/engine.js';
import type { StepCostModel } from '../../../emulator/engine/step-time.js';
import type {
  EngineBlockHash,
  EngineOutcome,
  EngineRequestInput,
  KvCacheEvent,
} from '../../../emulator/engine/types.js';

/** A fast, simple cost model for scheduler tests (times are irrelevant there, only ordering). */
export const TOY_COST: StepCostModel = {
  stepOverheadMs: 1,
  perSeqOverheadMs: 0,
  prefillMsPerToken: 0.5,
  attentionMsPerToken2: 0,
  weightReadMs: 2,
  kvReadMsPerToken: 0,
};

export function toyEngine(over: Partial<EngineOptions> = {}): Engine {
  return new Engine({
    cost: TOY_COST,
    kvCapacityTokens: 64 * 4,
    blockSize: 4,
    maxNumBatchedTokens: 16,
    maxNumSeqs: 8,
    maxModelLen: 1 << 20,
    meanOutputTokens: 8,
    seed: 1,
    eosTokenId: 0,
    ...over,
  });
}

/** Runs the engine until idle, returning every outcome. */
export function drain(engine: Engine, limit = 1_000_000): EngineOutcome[] {
  const out: EngineOutcome[] = [];
  for (let i = 0; i < limit; i++) {
    const t = engine.nextEventTimeMs();
    if (t === null) return out;
    out.push(...engine.advanceTo(t));
  }
  throw new Error('engine did not become idle');
}

export function prompt(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => 1 + ((i * 31 + seed * 977) % 5000));
}

/** Block hashes of a request's tokens (its prompt unless given: after a preemption, prompt + output). */
export function blockHashesOf(
  engine: Engine,
  req: EngineRequestInput,
  tokenIds: readonly number[] = req.promptTokenIds,
): EngineBlockHash[] {
  const hasher = new RequestBlockHasher(
    engine.noneHash,
    engine.blockSize,
    req.loraName ?? null,
    req.cacheSalt ?? null,
  );
  hasher.update(tokenIds);
  return hasher.hashes;
}

/**
 * Clean-room reference for what a subscriber learns from the event stream: a multiset of wire hashes
 * (uint64 as decimal strings), written from vLLM's event semantics only.
 */
export class EventReplica {
  readonly counts = new Map<string, number>();

  apply(e: KvCacheEvent): void {
    if (e.type === 'AllBlocksCleared') this.counts.clear();
    else if (e.type === 'BlockStored')
      for (const h of e.blockHashes) {
        const k = blockHashToU64(h).toString();
        this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
      }
    else
      for (const h of e.blockHashes) {
        const k = blockHashToU64(h).toString();
        const c = this.counts.get(k) ?? 0;
        if (c <= 0) throw new Error(`BlockRemoved for a hash never stored: ${k}`);
        if (c === 1) this.counts.delete(k);
        else this.counts.set(k, c - 1);
      }
  }

  /** Longest run of the prompt's blocks present, from block 0, in tokens (vLLM's hit rule). */
  longestPrefixTokens(engine: Engine, req: EngineRequestInput): number {
    if (req.skipPrefixCache) return 0;
    const hashes = blockHashesOf(engine, req);
    const maxBlocks = Math.floor((req.promptTokenIds.length - 1) / engine.blockSize);
    let k = 0;
    while (k < maxBlocks && this.holds(hashes[k]!)) k++;
    return k * engine.blockSize;
  }

  holds(h: EngineBlockHash): boolean {
    return this.counts.has(blockHashToU64(h).toString());
  }
}

export function engineCachedAsWire(engine: Engine): Map<string, number> {
  const out = new Map<string, number>();
  for (const [h, c] of engine.snapshot().cachedHashes) {
    const k = blockHashToU64(h).toString();
    out.set(k, (out.get(k) ?? 0) + c);
  }
  return out;
}
