// Maps vLLM KV events to index ops on our block keys, per pod; skips (and counts) what it cannot key.
import { blockKeys, keySeed } from '../core/block-keys.js';
import { TIERS, type BlockKey, type Tier, type VllmBlockHash } from '../core/types.js';
import type { IndexOp } from '../index/index.js';
import { BlockMap, type BlockEntry } from './block-map.js';
import type { BlockRemovedEvent, BlockStoredEvent, KvEvent } from './events.js';

/**
 * vLLM's `kv_cache_spec_kind`s whose blocks cache a whole prefix, as full attention does: MLA (DeepSeek V2/V3,
 * Kimi K2) and attention sinks are FullAttentionSpec subclasses (get_kv_cache_spec_kind in
 * vllm/v1/kv_cache_interface.py). Sliding-window, mamba and unknown groups keep only part of a prefix.
 */
const FULL_PREFIX_KINDS: ReadonlySet<string> = new Set([
  'full_attention',
  'mla_attention',
  'sink_full_attention',
]);

/**
 * Why blocks from the event stream were not written to the index. Never a wrong key: skip instead.
 * `reannounced` is not a loss: the pod already holds the block and the index already says so.
 */
export const SKIP_REASONS = [
  'unknown_parent',
  'unindexable_parent',
  'unreproducible_extra_keys',
  'ambiguous_extra_keys',
  'token_count_mismatch',
  'block_size_mismatch',
  'non_full_attention',
  'lora_name_missing',
  'offload_unmapped',
  'reannounced',
  'remove_unknown_hash',
  'remove_not_held',
] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

export interface MapperCounters {
  /** Blocks announced by BlockStored / BlockRemoved events, and AllBlocksCleared events. */
  storedBlocks: number;
  removedBlocks: number;
  clears: number;
  /** Store / remove ops written for them, and blocks skipped (re-announcements of held blocks excepted). */
  indexedBlocks: number;
  unindexedBlocks: number;
  /** Removals issued because the bounded block map evicted an entry the index still holds. */
  evictionRemovals: number;
  skipped: Record<SkipReason, number>;
}

export function newMapperCounters(): MapperCounters {
  return {
    storedBlocks: 0,
    removedBlocks: 0,
    clears: 0,
    indexedBlocks: 0,
    unindexedBlocks: 0,
    evictionRemovals: 0,
    skipped: Object.fromEntries(SKIP_REASONS.map((r) => [r, 0])) as Record<SkipReason, number>,
  };
}

/**
 * What a KeyMapper knows, for a collector handoff (handoff.ts): its map entries, least recently used first,
 * as [vLLM hash, our key or null, GPU, CPU, STORAGE counts], and the KV-cache groups that are not ours.
 */
export interface MapperSnapshot {
  entries: [VllmBlockHash, BlockKey | null, number, number, number][];
  otherGroups: number[];
}

/** Appends a key to the last op when it is the same kind and tier, so a batch becomes few ops. */
export function pushKey(ops: IndexOp[], op: 'store' | 'remove', tier: Tier, key: BlockKey): void {
  const last = ops[ops.length - 1];
  if (last !== undefined && last.op === op && last.tier === tier) last.keys.push(key);
  else ops.push({ op, tier, keys: [key] });
}

const MAX_SEEDS = 4096;

/**
 * Turns one pod's validated events into index ops keyed by OUR block keys (docs/architecture.md#block-keys): the
 * keys of a BlockStored are computed from its token_ids, chained from the parent's key, which we find
 * through a bounded map vLLM hash → our key (how llm-d does it; vLLM's own hash is never reproduced).
 * A chain start uses keySeed(model, lora_name, cache_salt) — the same seed the router uses.
 * Offloaded copies (medium CPU/STORAGE) are not keyed from their own event: each hash takes the key its GPU
 * BlockStored gave it (#offloaded). A GPU run from block 0 of blocks the pod already holds is a
 * re-announcement and changes no count.
 */
export class KeyMapper {
  readonly #map: BlockMap;
  readonly #seeds = new Map<string, BlockKey>();
  /** KV-cache groups seen with a kind other than full_attention: their removals are not ours. */
  readonly #otherGroups = new Set<number>();

  constructor(
    readonly model: string,
    /** The block size the router uses for this model; blocks of another size would never match. */
    readonly blockSize: number,
    maxEntries: number,
  ) {
    this.#map = new BlockMap(maxEntries);
  }

  get size(): number {
    return this.#map.size;
  }

  /** The pod restarted: its vLLM hashes mean nothing now. */
  reset(): void {
    this.#map.clear();
  }

  /** The index dropped this pod's blocks (clear): keep hash → key facts, zero the counts. */
  forgetCounts(): void {
    this.#map.forgetCounts();
  }

  snapshot(): MapperSnapshot {
    const entries: MapperSnapshot['entries'] = [];
    const m = this.#map;
    for (const [hash, e] of m.entries())
      entries.push([hash, e.key, m.count(e, 'GPU'), m.count(e, 'CPU'), m.count(e, 'STORAGE')]);
    return { entries, otherGroups: [...this.#otherGroups] };
  }

  /**
   * Takes over another mapper's knowledge (a handoff), for an index that holds exactly what its counts say.
   * A smaller map than the snapshot's keeps the most recent entries: the removals for the older held ones
   * are appended to `ops`, as when the map evicts them.
   */
  restore(snap: MapperSnapshot, c: MapperCounters, ops: IndexOp[] = []): IndexOp[] {
    this.#map.clear();
    this.#otherGroups.clear();
    for (const g of snap.otherGroups) this.#otherGroups.add(g);
    for (const [hash, key, gpu, cpu, storage] of snap.entries) {
      const e = this.#insert(hash, key, c, ops);
      this.#map.add(e, 'GPU', gpu);
      this.#map.add(e, 'CPU', cpu);
      this.#map.add(e, 'STORAGE', storage);
    }
    return ops;
  }

  /** Appends the ops for `events` to `ops` (adjacent ops of one kind and tier are merged). */
  toOps(events: readonly KvEvent[], c: MapperCounters, ops: IndexOp[] = []): IndexOp[] {
    for (const e of events) {
      if (e.kind === 'stored') this.#stored(e, c, ops);
      else if (e.kind === 'removed') this.#removed(e, c, ops);
      else {
        c.clears++;
        this.#map.clear();
        ops.push({ op: 'clear' });
      }
    }
    return ops;
  }

  #seed(lora: string | null, salt: string | null): BlockKey {
    const id = `${lora ?? ''}\u0000${salt ?? ''}`;
    let s = this.#seeds.get(id);
    if (s === undefined) {
      if (this.#seeds.size >= MAX_SEEDS) this.#seeds.clear();
      s = keySeed({ model: this.model, lora, cacheSalt: salt });
      this.#seeds.set(id, s);
    }
    return s;
  }

  #skip(c: MapperCounters, reason: SkipReason, n: number): void {
    c.skipped[reason] += n;
    c.unindexedBlocks += n;
  }

  /**
   * Records hashes[from..] as known-but-unindexable, so their descendants are skipped for the right reason.
   * `replace`: the event says these hashes have no key we can compute (their content), so an entry holding
   * a key is dropped too. Without it (the event's shape is wrong, not its content) a known entry stays.
   */
  #markUnindexable(
    hashes: readonly VllmBlockHash[],
    from: number,
    c: MapperCounters,
    ops: IndexOp[],
    replace = true,
  ): void {
    for (let i = from; i < hashes.length; i++) {
      const old = this.#map.peek(hashes[i]!);
      if (old !== undefined) {
        if (!replace) continue;
        this.#release(old, c, ops);
      }
      this.#insert(hashes[i]!, null, c, ops);
    }
  }

  #insert(hash: VllmBlockHash, key: BlockKey | null, c: MapperCounters, ops: IndexOp[]): BlockEntry {
    const { entry, evicted } = this.#map.insert(hash, key);
    for (const old of evicted) this.#release(old, c, ops, true);
    return entry;
  }

  /** Removes every store of this entry that the index still holds (the entry is going away). */
  #release(e: BlockEntry, c: MapperCounters, ops: IndexOp[], eviction = false): void {
    if (e.key === null || !this.#map.held(e)) return;
    for (const tier of TIERS) {
      const n = this.#map.count(e, tier);
      for (let i = 0; i < n; i++) pushKey(ops, 'remove', tier, e.key);
      if (eviction) c.evictionRemovals += n;
      this.#map.add(e, tier, -n);
    }
  }

  #stored(e: BlockStoredEvent, c: MapperCounters, ops: IndexOp[]): void {
    const n = e.hashes.length;
    c.storedBlocks += n;
    if (e.specKind !== null && !FULL_PREFIX_KINDS.has(e.specKind)) {
      if (e.groupIdx !== null) this.#otherGroups.add(e.groupIdx);
      return this.#skip(c, 'non_full_attention', n);
    }
    if (e.tier !== 'GPU') return this.#offloaded(e, c, ops);
    if (e.loraNameMissing) {
      this.#markUnindexable(e.hashes, 0, c, ops);
      return this.#skip(c, 'lora_name_missing', n);
    }
    if (e.blockSize !== this.blockSize) {
      this.#markUnindexable(e.hashes, 0, c, ops, false);
      return this.#skip(c, 'block_size_mismatch', n);
    }
    if (e.tokenIds.length !== n * e.blockSize) {
      this.#markUnindexable(e.hashes, 0, c, ops, false);
      return this.#skip(c, 'token_count_mismatch', n);
    }

    let parentKey: BlockKey;
    if (e.parent === null) {
      // cache_salt rides on the first block of a sequence only (docs/collector.md#wire-format, extra_keys).
      const first = e.extraKeys?.[0] ?? null;
      if (first !== null && (first.opaque || first.strings.length > 1)) {
        this.#markUnindexable(e.hashes, 0, c, ops);
        return this.#skip(c, 'unreproducible_extra_keys', n);
      }
      if (first !== null && !saltIsUnambiguous(e)) {
        // The string may be a multimodal identifier, not a cache_salt: a salted key would be a wrong key.
        this.#markUnindexable(e.hashes, 0, c, ops);
        return this.#skip(c, 'ambiguous_extra_keys', n);
      }
      parentKey = this.#seed(e.loraName, first?.strings[0] ?? null);
    } else {
      const p = this.#map.touch(e.parent);
      if (p === undefined) return this.#skip(c, 'unknown_parent', n);
      if (p.key === null) {
        this.#markUnindexable(e.hashes, 0, c, ops);
        return this.#skip(c, 'unindexable_parent', n);
      }
      parentKey = p.key;
    }

    const keys = blockKeys(e.tokenIds, e.blockSize, parentKey);
    for (let i = 0; i < n; i++) {
      const x = e.extraKeys?.[i] ?? null;
      const chainStart = i === 0 && e.parent === null;
      if (x !== null && (x.opaque || (!chainStart && x.strings.length > 0))) {
        // Multimodal or prompt-embed content: these tokens do not identify the KV. Skip them and the rest.
        this.#markUnindexable(e.hashes, i, c, ops);
        return this.#skip(c, 'unreproducible_extra_keys', n - i);
      }
      const hash = e.hashes[i]!;
      const key = keys[i]!;
      let ent = this.#map.touch(hash);
      if (ent === undefined || ent.key !== key) {
        if (ent !== undefined) this.#release(ent, c, ops);
        ent = this.#insert(hash, key, c, ops);
      } else if (e.parent === null && this.#map.count(ent, 'GPU') > 0) {
        // A run from block 0 of blocks the pod already holds: with kv_cache_report_mode=full vLLM re-announces
        // a request's prefix-cache hits this way (BlockPool.emit_cached_block_events) without touching block
        // state, so no BlockRemoved will ever pair with it. Counting it would leave the block in the index
        // after its last eviction. A second physical block under a held hash (an exact repeat recomputes its
        // last block) is stored after its parent, and counted; from block 0 only by a request that missed the
        // hit anyway (a one-block prompt, or one that skips the prefix cache): that copy goes uncounted.
        c.skipped.reannounced++; // not in unindexedBlocks: the index holds the block
        continue;
      }
      this.#map.add(ent, e.tier, 1);
      pushKey(ops, 'store', e.tier, key);
      c.indexedBlocks++;
    }
  }

  /**
   * A BlockStored from an offloading connector (medium CPU or STORAGE). Those tiers hold copies of blocks the
   * GPU computed, named by the GPU's own block hashes. OffloadingConnector.take_events sends them with parent
   * None, token_ids [] and the offloaded block size (one hash per offloaded block: the hash of its last GPU
   * block); its opt-in self-describing form (#48679) with tokens but no extra_keys, so no cache_salt on a chain
   * start. So the event is never keyed itself: each hash takes the key its GPU BlockStored established, and
   * only when one offloaded block is one of our blocks (the same block size). It never changes GPU facts.
   */
  #offloaded(e: BlockStoredEvent, c: MapperCounters, ops: IndexOp[]): void {
    if (e.blockSize !== this.blockSize) return this.#skip(c, 'block_size_mismatch', e.hashes.length);
    for (const hash of e.hashes) {
      const ent = this.#map.touch(hash);
      if (ent === undefined || ent.key === null) {
        this.#skip(c, 'offload_unmapped', 1);
        continue;
      }
      this.#map.add(ent, e.tier, 1);
      pushKey(ops, 'store', e.tier, ent.key);
      c.indexedBlocks++;
    }
  }

  #removed(e: BlockRemovedEvent, c: MapperCounters, ops: IndexOp[]): void {
    const n = e.hashes.length;
    c.removedBlocks += n;
    if (e.groupIdx !== null && this.#otherGroups.has(e.groupIdx))
      return this.#skip(c, 'non_full_attention', n);
    for (const hash of e.hashes) {
      const ent = this.#map.peek(hash);
      if (ent === undefined || ent.key === null) {
        // An unindexable GPU block is gone; an offloaded copy of one says nothing about the GPU's.
        if (ent !== undefined && e.tier === 'GPU') this.#map.delete(hash);
        this.#skip(c, 'remove_unknown_hash', 1);
        continue;
      }
      if (this.#map.count(ent, e.tier) === 0) {
        this.#skip(c, 'remove_not_held', 1);
      } else {
        this.#map.add(ent, e.tier, -1);
        pushKey(ops, 'remove', e.tier, ent.key);
        c.indexedBlocks++;
      }
      // An evicted block cannot be a parent again until vLLM stores it anew (which re-creates the entry).
      if (!this.#map.held(ent)) this.#map.delete(hash);
    }
  }
}

/**
 * Whether a plain string in a chain start's extra_keys is the cache_salt. vLLM puts the multimodal keys of a
 * block before its cache_salt (generate_block_hash_extra_keys). Since vLLM #36708 (March 2026) each is an
 * (identifier, offset) tuple, which the decoder marks opaque; before it, from #33304 (the first vLLM to send
 * extra_keys) on, it was the bare identifier string, which nothing tells from a salt. Events that carry
 * group_idx (#37688) or kv_cache_spec_kind (#40984), both merged after #36708, come from a vLLM where a
 * plain string can only be the salt.
 */
function saltIsUnambiguous(e: BlockStoredEvent): boolean {
  return e.groupIdx !== null || e.specKind !== null;
}
