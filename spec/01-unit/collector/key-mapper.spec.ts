import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import type { BlockKey, Tier, VllmBlockHash } from '../../../src/core/types.js';
import type { BlockStoredEvent } from '../../../src/collector/events.js';
import { KeyMapper, newMapperCounters } from '../../../src/collector/key-mapper.js';
import type { IndexOp } from '../../../src/index/kv-index.js';

const MODEL = 'Qwen/Qwen3-8B';
const BS = 4;
const h = (n: number | string): VllmBlockHash => String(n) as VllmBlockHash;

function stored(
  p: Partial<BlockStoredEvent> & { hashes: VllmBlockHash[]; tokenIds: number[] },
): BlockStoredEvent {
  return {
    kind: 'stored',
    parent: null,
    blockSize: BS,
    loraName: null,
    loraNameMissing: false,
    tier: 'GPU',
    extraKeys: null,
    groupIdx: null,
    specKind: null,
    ...p,
  };
}

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
});
