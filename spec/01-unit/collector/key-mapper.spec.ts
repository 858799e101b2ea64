import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import type { BlockKey, Tier, VllmBlockHash } from '../../../src/core/types.js';
import type { BlockStoredEvent, KvEvent } from '../../../src/collector/events.js';
import { KeyMapper, newMapperCounters } from '../../../src/collector/key-mapper.js';
import type { IndexOp } from '../../../src/index/index.js';
import { storedEvent } from '../../helpers/collector/mapper-events.js';

const MODEL = 'Qwen/Qwen3-8B';
const BS = 4;
const h = (n: number | string): VllmBlockHash => String(n) as VllmBlockHash;

const stored = (p: Partial<BlockStoredEvent> & { hashes: VllmBlockHash[]; tokenIds: number[] }) =>
  storedEvent(BS, p);

function keysOf(ops: IndexOp[], op: 'store' | 'remove', tier: Tier = 'GPU'): BlockKey[] {
  return ops.flatMap((o) => (o.op === op && o.tier === tier ? o.keys : []));
}

const tokens = (n: number, from = 1): number[] => Array.from({ length: n }, (_, i) => from + i);

describe('KeyMapper', () => {
  it('property: keys from split, chained BlockStored events equal the router keys of the whole prompt', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: BS, maxLength: 12 * BS }),
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 12 }),
        fc.option(fc.string({ minLength: 1, maxLength: 8 }), { nil: null }),
        fc.option(fc.string({ minLength: 1, maxLength: 8 }), { nil: null }),
        (prompt, cuts, lora, salt) => {
          const nBlocks = Math.floor(prompt.length / BS);
          const m = new KeyMapper(MODEL, BS, 10_000);
          const c = newMapperCounters();
          const ops: IndexOp[] = [];
          let b = 0;
          let ci = 0;
          while (b < nBlocks) {
            const n = Math.min(cuts[ci++ % cuts.length]!, nBlocks - b);
            const hashes = tokens(n, 1000 + b).map(h);
            // After the decoder: the LoRA name is off the extra keys; cache_salt stays on the first block.
            const extra = hashes.map((_, i) =>
              b + i === 0 && salt ? { strings: [salt], opaque: false } : null,
            );
            m.toOps(
              [
                stored({
                  hashes,
                  parent: b === 0 ? null : h(1000 + b - 1),
                  tokenIds: prompt.slice(b * BS, (b + n) * BS),
                  loraName: lora,
                  extraKeys: extra,
                  groupIdx: 0, // a vLLM whose multimodal keys are tuples: a plain string is the salt
                }),
              ],
              c,
              ops,
            );
            b += n;
          }
          const router = blockKeys(prompt, BS, keySeed({ model: MODEL, lora, cacheSalt: salt }));
          expect(keysOf(ops, 'store')).toEqual(router);
          expect(c.indexedBlocks).toBe(nBlocks);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('never indexes a block whose parent it does not know, nor that block’s descendants', () => {
    const m = new KeyMapper(MODEL, BS, 1000);
    const c = newMapperCounters();
    const ops = m.toOps(
      [
        stored({ hashes: [h(2), h(3)], parent: h(1), tokenIds: tokens(8) }),
        stored({ hashes: [h(4)], parent: h(3), tokenIds: tokens(4) }),
        { kind: 'removed', hashes: [h(3)], tier: 'GPU', groupIdx: null },
      ],
      c,
    );
    expect(ops).toEqual([]);
    expect(c.skipped).toMatchObject({ unknown_parent: 3, remove_unknown_hash: 1 });
  });

  it('translates removals through the map, refcounting duplicates per tier', () => {
    const m = new KeyMapper(MODEL, BS, 1000);
    const c = newMapperCounters();
    const [k1, k2] = blockKeys(tokens(8), BS, keySeed({ model: MODEL }));
    const ops = m.toOps(
      [
        stored({ hashes: [h(1), h(2)], tokenIds: tokens(8) }),
        stored({ hashes: [h(2)], parent: h(1), tokenIds: tokens(4, 5) }), // stored twice (#55092)
        stored({ hashes: [h(1)], tokenIds: tokens(4), tier: 'CPU' }),
        { kind: 'removed', hashes: [h(2)], tier: 'GPU', groupIdx: null },
        { kind: 'removed', hashes: [h(2)], tier: 'GPU', groupIdx: null },
        { kind: 'removed', hashes: [h(2)], tier: 'GPU', groupIdx: null },
        { kind: 'removed', hashes: [h(1)], tier: 'GPU', groupIdx: null },
        { kind: 'removed', hashes: [h(1)], tier: 'CPU', groupIdx: null },
      ],
      c,
    );
    expect(ops).toEqual([
      { op: 'store', tier: 'GPU', keys: [k1, k2, k2] },
      { op: 'store', tier: 'CPU', keys: [k1] },
      { op: 'remove', tier: 'GPU', keys: [k2, k2, k1] },
      { op: 'remove', tier: 'CPU', keys: [k1] },
    ]);
    expect(c.skipped.remove_unknown_hash).toBe(1); // the third removal of 2: its entry was dropped at zero
    expect(m.size).toBe(0);
  });

  it('bounds the map: evicting a held entry removes its blocks from the index', () => {
    const m = new KeyMapper(MODEL, BS, 2);
    const c = newMapperCounters();
    const keys = blockKeys(tokens(12), BS, keySeed({ model: MODEL }));
    const ops = m.toOps([stored({ hashes: [h(1), h(2), h(3)], tokenIds: tokens(12) })], c);
    expect(ops).toEqual([
      { op: 'store', tier: 'GPU', keys: [keys[0], keys[1]] },
      { op: 'remove', tier: 'GPU', keys: [keys[0]] },
      { op: 'store', tier: 'GPU', keys: [keys[2]] },
    ]);
    expect(m.size).toBe(2);
    expect(c.evictionRemovals).toBe(1);
  });

  it('skips blocks with content we cannot key (multimodal, prompt embeds) and all their descendants', () => {
    const m = new KeyMapper(MODEL, BS, 1000);
    const c = newMapperCounters();
    const ops = m.toOps(
      [
        stored({
          hashes: [h(1), h(2), h(3)],
          tokenIds: tokens(12),
          extraKeys: [null, { strings: [], opaque: true }, null],
        }),
        stored({ hashes: [h(4)], parent: h(3), tokenIds: tokens(4) }),
        stored({ hashes: [h(5)], parent: h(1), tokenIds: tokens(4, 50) }),
      ],
      c,
    );
    const [k1] = blockKeys(tokens(4), BS, keySeed({ model: MODEL }));
    const [k5] = blockKeys(tokens(4, 50), BS, k1!);
    expect(ops).toEqual([{ op: 'store', tier: 'GPU', keys: [k1, k5] }]);
    expect(c.skipped).toMatchObject({ unreproducible_extra_keys: 2, unindexable_parent: 1 });
    // A second string on a chain start, or any string on a later block, is not a cache_salt we can use.
    const c2 = newMapperCounters();
    new KeyMapper(MODEL, BS, 1000).toOps(
      [stored({ hashes: [h(1)], tokenIds: tokens(4), extraKeys: [{ strings: ['a', 'b'], opaque: false }] })],
      c2,
    );
    expect(c2.skipped.unreproducible_extra_keys).toBe(1);
  });

  it('only indexes full-attention groups, and ignores removals from the other groups', () => {
    const m = new KeyMapper(MODEL, BS, 1000);
    const c = newMapperCounters();
    const ops = m.toOps(
      [
        stored({ hashes: [h(1)], tokenIds: tokens(4), groupIdx: 0, specKind: 'full_attention' }),
        stored({ hashes: [h(1)], tokenIds: tokens(4), groupIdx: 1, specKind: 'sliding_window' }),
        { kind: 'removed', hashes: [h(1)], tier: 'GPU', groupIdx: 1 },
      ],
      c,
    );
    expect(keysOf(ops, 'store')).toHaveLength(1);
    expect(keysOf(ops, 'remove')).toHaveLength(0);
    expect(c.skipped.non_full_attention).toBe(2);
  });

  it('indexes MLA and attention-sink groups as full attention (DeepSeek, Kimi K2 send mla_attention)', () => {
    for (const specKind of ['mla_attention', 'sink_full_attention']) {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const ops = m.toOps(
        [
          stored({ hashes: [h(1)], tokenIds: tokens(4), groupIdx: 0, specKind }),
          { kind: 'removed', hashes: [h(1)], tier: 'GPU', groupIdx: 0 },
        ],
        c,
      );
      expect(keysOf(ops, 'store'), specKind).toHaveLength(1);
      expect(keysOf(ops, 'remove'), specKind).toHaveLength(1);
      expect(c.skipped.non_full_attention ?? 0, specKind).toBe(0);
    }
  });

  it('counts and skips events it must not key: wrong token count, other block size, unnamed LoRA', () => {
    const m = new KeyMapper(MODEL, BS, 1000);
    const c = newMapperCounters();
    const ops = m.toOps(
      [
        stored({ hashes: [h(1), h(2)], tokenIds: tokens(7) }),
        stored({ hashes: [h(3)], tokenIds: tokens(8), blockSize: 8 }),
        stored({ hashes: [h(4)], tokenIds: tokens(4), loraNameMissing: true }),
      ],
      c,
    );
    expect(ops).toEqual([]);
    expect(c.skipped).toMatchObject({
      token_count_mismatch: 2,
      block_size_mismatch: 1,
      lora_name_missing: 1,
    });
  });

  it('AllBlocksCleared → clear op and a fresh map; forgetCounts keeps parents but not counts', () => {
    const m = new KeyMapper(MODEL, BS, 1000);
    const c = newMapperCounters();
    const ops = m.toOps(
      [
        stored({ hashes: [h(1)], tokenIds: tokens(4) }),
        { kind: 'cleared' },
        stored({ hashes: [h(2)], parent: h(1), tokenIds: tokens(4) }),
      ],
      c,
    );
    expect(ops.map((o) => o.op)).toEqual(['store', 'clear']);
    expect(c.skipped.unknown_parent).toBe(1);

    const m2 = new KeyMapper(MODEL, BS, 1000);
    const c2 = newMapperCounters();
    m2.toOps([stored({ hashes: [h(1)], tokenIds: tokens(4) })], c2);
    m2.forgetCounts(); // the pod was cleared in the index
    const after = m2.toOps(
      [
        { kind: 'removed', hashes: [h(1)], tier: 'GPU', groupIdx: null },
        stored({ hashes: [h(1)], tokenIds: tokens(4) }),
        stored({ hashes: [h(2)], parent: h(1), tokenIds: tokens(4, 9) }),
      ],
      c2,
    );
    expect(c2.skipped.remove_not_held).toBe(1);
    expect(keysOf(after, 'store')).toHaveLength(2);
  });

  describe('offloaded copies (medium CPU / STORAGE)', () => {
    const seed = keySeed({ model: MODEL });
    const [k1, k2, k3, k4, k5, k6] = blockKeys(tokens(24), BS, seed);
    const gpuChain = (): BlockStoredEvent =>
      stored({ hashes: [h(11), h(12), h(13), h(14)], tokenIds: tokens(16) });
    const extension = (): BlockStoredEvent =>
      stored({ hashes: [h(15), h(16)], parent: h(14), tokenIds: tokens(8, 17) });
    // vLLM's released OffloadingConnector.take_events: parent None, token_ids [], the offloaded block size.
    const offload = (hashes: VllmBlockHash[], blockSize = BS, tier: Tier = 'CPU'): BlockStoredEvent =>
      stored({ hashes, tokenIds: [], blockSize, tier });

    it('take the keys the GPU events gave their hashes, and leave the GPU entries as they were', () => {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const ops = m.toOps([gpuChain(), offload([h(12), h(14)]), extension()], c);
      expect(ops).toEqual([
        { op: 'store', tier: 'GPU', keys: [k1, k2, k3, k4] },
        { op: 'store', tier: 'CPU', keys: [k2, k4] },
        { op: 'store', tier: 'GPU', keys: [k5, k6] },
      ]);
      expect(c.unindexedBlocks).toBe(0);
      // The GPU evicts block 14; its CPU copy stays indexed until the CPU evicts it too.
      const later = m.toOps(
        [
          { kind: 'removed', hashes: [h(16), h(15), h(14)], tier: 'GPU', groupIdx: null },
          { kind: 'removed', hashes: [h(14)], tier: 'CPU', groupIdx: null },
        ],
        c,
      );
      expect(later).toEqual([
        { op: 'remove', tier: 'GPU', keys: [k6, k5, k4] },
        { op: 'remove', tier: 'CPU', keys: [k4] },
      ]);
      expect(m.size).toBe(3);
    });

    it('an offloaded block of another size is skipped and counted, and damages nothing', () => {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const ops = m.toOps([gpuChain(), offload([h(12), h(14)], 4 * BS), extension()], c);
      expect(ops).toEqual([{ op: 'store', tier: 'GPU', keys: [k1, k2, k3, k4, k5, k6] }]);
      expect(c.skipped).toMatchObject({ block_size_mismatch: 2, unindexable_parent: 0 });
    });

    it('hashes no indexed GPU block carries are skipped; removing their copies keeps the GPU facts', () => {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const mm = { strings: [], opaque: true };
      const ops = m.toOps(
        [
          stored({ hashes: [h(1), h(2)], tokenIds: tokens(8), extraKeys: [mm, null] }),
          offload([h(1), h(99)]),
          { kind: 'removed', hashes: [h(1)], tier: 'CPU', groupIdx: null },
          stored({ hashes: [h(3)], parent: h(2), tokenIds: tokens(4) }),
        ],
        c,
      );
      expect(ops).toEqual([]);
      expect(c.skipped).toMatchObject({
        unreproducible_extra_keys: 2,
        offload_unmapped: 2,
        remove_unknown_hash: 1,
        unindexable_parent: 1, // not unknown_parent: the CPU removal left the GPU's marker alone
      });
    });

    it('a self-describing offload event (tokens, no extra_keys) still gets the salted keys of its GPU chain', () => {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const salted = blockKeys(tokens(8), BS, keySeed({ model: MODEL, cacheSalt: 'tenant-1' }));
      const ops = m.toOps(
        [
          stored({
            hashes: [h(1), h(2)],
            tokenIds: tokens(8),
            extraKeys: [{ strings: ['tenant-1'], opaque: false }, null],
            groupIdx: 0,
          }),
          stored({ hashes: [h(1), h(2)], tokenIds: tokens(8), tier: 'STORAGE', groupIdx: 0 }),
        ],
        c,
      );
      expect(keysOf(ops, 'store', 'STORAGE')).toEqual(salted);
    });
  });

  describe('chain-start re-announcements (kv_cache_report_mode=full)', () => {
    const [k1, k2, k3] = blockKeys(tokens(12), BS, keySeed({ model: MODEL }));
    const run = (): BlockStoredEvent => stored({ hashes: [h(11), h(12), h(13)], tokenIds: tokens(12) });
    const evict = (n: number): KvEvent => ({ kind: 'removed', hashes: [h(n)], tier: 'GPU', groupIdx: null });

    it('are not counted: after one store, two re-announcements and one eviction the index holds nothing', () => {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const ops = m.toOps([run(), run(), run(), evict(13), evict(12), evict(11)], c);
      expect(ops).toEqual([
        { op: 'store', tier: 'GPU', keys: [k1, k2, k3] },
        { op: 'remove', tier: 'GPU', keys: [k3, k2, k1] },
      ]);
      expect(c.skipped.reannounced).toBe(6);
      expect(c.skipped.remove_not_held + c.skipped.remove_unknown_hash).toBe(0);
      expect(m.size).toBe(0);
    });

    it('store what the pod no longer holds, and still count a second physical block stored after its parent', () => {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const ops = m.toOps(
        [
          run(),
          evict(13),
          run(), // blocks 11 and 12 re-announced; 13 cached again
          stored({ hashes: [h(13)], parent: h(12), tokenIds: tokens(4, 9) }), // an exact repeat recomputes it
          evict(13),
        ],
        c,
      );
      expect(ops).toEqual([
        { op: 'store', tier: 'GPU', keys: [k1, k2, k3] },
        { op: 'remove', tier: 'GPU', keys: [k3] },
        { op: 'store', tier: 'GPU', keys: [k3, k3] },
        { op: 'remove', tier: 'GPU', keys: [k3] },
      ]);
      expect(c.skipped.reannounced).toBe(2);
    });

    it('known limit: a second physical block stored from block 0 is taken as one (an under-claim, never stale)', () => {
      // vLLM stores a held hash again from block 0 only when a request missed it anyway: a one-block prompt
      // repeated exactly (the last prompt token is always recomputed), or a request that skips the prefix cache.
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const one = (): BlockStoredEvent => stored({ hashes: [h(11)], tokenIds: tokens(4) });
      const ops = m.toOps([one(), one(), evict(11), evict(11)], c);
      expect(ops).toEqual([
        { op: 'store', tier: 'GPU', keys: [k1] },
        { op: 'remove', tier: 'GPU', keys: [k1] },
      ]);
      expect(c.skipped).toMatchObject({ reannounced: 1, remove_unknown_hash: 1 });
    });
  });

  describe('a chain start’s extra_keys: cache_salt or multimodal identifier', () => {
    const s = (...strings: string[]) => ({ strings, opaque: false });

    it('a lone string from a vLLM whose multimodal identifiers were plain strings too is skipped, with its chain', () => {
      // vLLM between #33304 and #36708: an image in block 0 gives it extra_keys ("<mm hash>",).
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const ops = m.toOps(
        [
          stored({
            hashes: [h(1), h(2), h(3)],
            tokenIds: tokens(12),
            extraKeys: [s('a3f9c0d2'), s('a3f9c0d2'), null],
          }),
          stored({ hashes: [h(4)], parent: h(3), tokenIds: tokens(4, 13) }),
          stored({ hashes: [h(5)], tokenIds: tokens(4, 50), extraKeys: [s('tenant-1')] }),
        ],
        c,
      );
      expect(ops).toEqual([]);
      expect(c.skipped).toMatchObject({ ambiguous_extra_keys: 4, unindexable_parent: 1 });
    });

    it('from a vLLM that sends group_idx or kv_cache_spec_kind (its multimodal keys are tuples) it is the salt', () => {
      const m = new KeyMapper(MODEL, BS, 1000);
      const c = newMapperCounters();
      const salted = blockKeys(tokens(8), BS, keySeed({ model: MODEL, cacheSalt: 'tenant-1' }));
      const ops = m.toOps(
        [
          stored({
            hashes: [h(1), h(2)],
            tokenIds: tokens(8),
            extraKeys: [s('tenant-1'), null],
            groupIdx: 0,
          }),
          stored({
            hashes: [h(3)],
            tokenIds: tokens(4),
            extraKeys: [s('tenant-1')],
            specKind: 'full_attention',
          }),
          // the same vLLM with an image in block 0: ((id, offset), salt) — opaque, skipped
          stored({
            hashes: [h(4)],
            tokenIds: tokens(4),
            extraKeys: [{ strings: ['tenant-1'], opaque: true }],
            groupIdx: 0,
          }),
        ],
        c,
      );
      expect(keysOf(ops, 'store')).toEqual([...salted, salted[0]]);
      expect(c.skipped).toMatchObject({ ambiguous_extra_keys: 0, unreproducible_extra_keys: 1 });
    });
  });

  it('a GPU event of the wrong shape leaves a hash it repeats as it was', () => {
    const m = new KeyMapper(MODEL, BS, 1000);
    const c = newMapperCounters();
    const [k1, k2] = blockKeys(tokens(8), BS, keySeed({ model: MODEL }));
    const ops = m.toOps(
      [
        stored({ hashes: [h(1)], tokenIds: tokens(4) }),
        stored({ hashes: [h(1)], tokenIds: tokens(3) }),
        stored({ hashes: [h(1)], tokenIds: tokens(8), blockSize: 8 }),
        stored({ hashes: [h(2)], parent: h(1), tokenIds: tokens(4, 5) }),
      ],
      c,
    );
    expect(ops).toEqual([{ op: 'store', tier: 'GPU', keys: [k1, k2] }]);
    expect(c.skipped).toMatchObject({ token_count_mismatch: 1, block_size_mismatch: 1 });
  });
});
