import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  blockKeys,
  ChainMemo,
  isBlockKey,
  keyFromWords,
  keySeed,
  keyToWords,
} from '../../../src/core/block-keys.js';

const seed = keySeed({ model: 'Qwen/Qwen3-8B' });
const tokens = fc.array(fc.integer({ min: 0, max: 262_143 }), { maxLength: 200 });

describe('block keys', () => {
  it('pins the key scheme (changing it invalidates every index: bump KEY_SCHEME_VERSION)', () => {
    const ids = Array.from({ length: 32 }, (_, i) => i + 1);
    expect(seed).toBe(keySeed({ model: 'Qwen/Qwen3-8B' }));
    expect(blockKeys(ids, 16, seed)).toMatchInlineSnapshot(`
      [
        "f993b9fa0997021c",
        "fc87ae898d14dcf6",
      ]
    `);
  });

  it('keys only full blocks', () => {
    expect(blockKeys([1, 2, 3], 4, seed)).toEqual([]);
    expect(blockKeys([1, 2, 3, 4, 5], 4, seed)).toHaveLength(1);
    expect(blockKeys(new Array(64).fill(7), 16, seed, 2)).toHaveLength(2);
  });

  it('rejects a non-positive block size', () => {
    expect(() => blockKeys([1], 0, seed)).toThrow(RangeError);
  });

  it('a prefix of the tokens gives a prefix of the keys', () => {
    fc.assert(
      fc.property(tokens, fc.nat(200), fc.integer({ min: 1, max: 32 }), (t, cut, bs) => {
        const all = blockKeys(t, bs, seed);
        const part = blockKeys(t.slice(0, cut), bs, seed);
        expect(all.slice(0, part.length)).toEqual(part);
      }),
    );
  });

  it('chaining from a parent key equals keying the whole sequence', () => {
    fc.assert(
      fc.property(tokens, fc.integer({ min: 1, max: 16 }), (t, bs) => {
        const all = blockKeys(t, bs, seed);
        if (all.length < 2) return;
        const tail = blockKeys(t.slice(bs), bs, all[0]!);
        expect(tail).toEqual(all.slice(1));
      }),
    );
  });

  it('every key depends on all earlier tokens, on the model, the LoRA and the cache salt', () => {
    const t = Array.from({ length: 64 }, (_, i) => i * 7);
    const base = blockKeys(t, 16, seed);
    const changed = [...t];
    changed[0] = 99_999;
    const other = blockKeys(changed, 16, seed);
    other.forEach((k, i) => expect(k).not.toBe(base[i]));
    for (const s of [
      keySeed({ model: 'Qwen/Qwen3-32B' }),
      keySeed({ model: 'Qwen/Qwen3-8B', lora: 'sql-adapter' }),
      keySeed({ model: 'Qwen/Qwen3-8B', cacheSalt: 'tenant-a' }),
    ]) {
      expect(s).not.toBe(seed);
      blockKeys(t, 16, s).forEach((k, i) => expect(k).not.toBe(base[i]));
    }
    // Absent and empty salt are the same request to vLLM (no salt).
    expect(keySeed({ model: 'm', cacheSalt: null })).toBe(keySeed({ model: 'm' }));
  });

  it('keys are 16 hex digits and round-trip through words', () => {
    fc.assert(
      fc.property(fc.integer(), fc.integer(), (hi, lo) => {
        const k = keyFromWords(hi | 0, lo | 0);
        expect(isBlockKey(k)).toBe(true);
        expect(keyToWords(k)).toEqual([hi | 0, lo | 0]);
      }),
    );
  });

  it('has no collisions over many distinct blocks', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const [k] = blockKeys([i, i >> 3, 5, i % 7], 4, seed);
      seen.add(k!);
    }
    expect(seen.size).toBe(20_000);
  });
});

describe('ChainMemo: keys of prompts that extend recent ones', () => {
  it('equals blockKeys for every prompt of a stream of growing, repeated and unrelated prompts', () => {
    const seeds = [keySeed({ model: 'm' }), keySeed({ model: 'other' })];
    // Prompts grow from a few bases (multiturn), repeat, or diverge mid-block; a tiny memo evicts often.
    const prompt = fc.record({
      base: fc.integer({ min: 0, max: 2 }),
      keep: fc.integer({ min: 0, max: 120 }),
      extra: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 40 }),
      seed: fc.integer({ min: 0, max: 1 }),
      blockSize: fc.constantFrom(4, 16),
    });
    fc.assert(
      fc.property(
        fc.array(prompt, { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 20, max: 400 }),
        (ps, cap) => {
          const memo = new ChainMemo(cap, 3);
          const bases = [0, 1, 2].map((b) => Array.from({ length: 120 }, (_, i) => (i * 31 + b * 7) % 9));
          for (const p of ps) {
            const tokens = [...bases[p.base]!.slice(0, p.keep), ...p.extra];
            const seed = seeds[p.seed]!;
            expect(memo.keys(tokens, p.blockSize, seed)).toEqual(blockKeys(tokens, p.blockSize, seed));
            // The same body again: served from the memo, still equal.
            expect(memo.keys(tokens, p.blockSize, seed)).toEqual(blockKeys(tokens, p.blockSize, seed));
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
