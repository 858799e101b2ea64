import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gallopPrefix, tierPrefixes } from '../../../src/index/index.js';

describe('gallopPrefix', () => {
  it('is exact on prefix-closed sets, with O(log n) probes', () => {
    fc.assert(
      fc.property(fc.nat({ max: 5000 }), fc.nat({ max: 5000 }), (count, heldLen) => {
        const held = Math.min(heldLen, count);
        const probes: number[] = [];
        const got = gallopPrefix(count, (i) => {
          expect(i).toBeGreaterThanOrEqual(0);
          expect(i).toBeLessThan(count);
          probes.push(i);
          return i < held;
        });
        expect(got).toBe(held);
        expect(probes.length).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(count + 1)) + 2);
      }),
    );
  });

  it('probes block 0, 1, 3, 7, … then bisects', () => {
    const probes: number[] = [];
    expect(gallopPrefix(1000, (i) => (probes.push(i), i < 600))).toBe(600);
    expect(probes.slice(0, 11)).toEqual([0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 999]);
    const full: number[] = [];
    expect(gallopPrefix(1000, (i) => (full.push(i), true))).toBe(1000);
    expect(full).toEqual([0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 999]);
    expect(gallopPrefix(0, () => true)).toBe(0);
    expect(gallopPrefix(5, () => false)).toBe(0);
  });

  it('always answers a length whose last block was seen held (or 0), on any set', () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 300 }), (bits) => {
        const got = gallopPrefix(bits.length, (i) => bits[i]!);
        expect(got).toBeGreaterThanOrEqual(0);
        expect(got).toBeLessThanOrEqual(bits.length);
        if (got > 0) expect(bits[got - 1]).toBe(true);
        if (got < bits.length) expect(bits[got]).toBe(false);
      }),
    );
  });
});

describe('tierPrefixes', () => {
  it('is cumulative (GPU ≤ CPU ≤ STORAGE) on any tier assignment, and exact when each tier is prefix-closed', () => {
    const rank = fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined });
    fc.assert(
      fc.property(fc.array(rank, { maxLength: 200 }), (ranks) => {
        const p = tierPrefixes(ranks.length, (i) => ranks[i]);
        expect(p.GPU).toBeLessThanOrEqual(p.CPU);
        expect(p.CPU).toBeLessThanOrEqual(p.STORAGE);
      }),
    );
    // skipping a slower tier whose rank never showed on the path changes no answer
    fc.assert(
      fc.property(fc.array(rank, { maxLength: 200 }), (ranks) => {
        const at = (t: number) => (i: number) => ranks[i] !== undefined && ranks[i]! <= t;
        const g = gallopPrefix(ranks.length, at(0));
        const c = Math.max(g, gallopPrefix(ranks.length, at(1)));
        const naive = { GPU: g, CPU: c, STORAGE: Math.max(c, gallopPrefix(ranks.length, at(2))) };
        expect(tierPrefixes(ranks.length, (i) => ranks[i])).toEqual(naive);
      }),
    );
    // GPU blocks 0..2, CPU 3..6, STORAGE 7..9, nothing after
    const ranks = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, undefined, undefined];
    expect(tierPrefixes(ranks.length, (i) => ranks[i])).toEqual({ GPU: 3, CPU: 7, STORAGE: 10 });
    // Not prefix-closed (block 10 missing, 11 held): the gallop's last probe (block 11) hits, an estimate.
    const holey = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, undefined, 0];
    expect(tierPrefixes(holey.length, (i) => holey[i])).toEqual({ GPU: 3, CPU: 7, STORAGE: 12 });
  });
});
