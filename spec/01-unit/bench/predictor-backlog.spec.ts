import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { prefillBacklogMs, prefillBacklogTokens } from '../../../src/core/predictor.js';

const res = (atMs: number, uncachedTokens: number) => ({
  podId: 'a',
  atMs,
  uncachedTokens,
  promptTokens: uncachedTokens,
});

describe('prefillBacklogTokens (the router’s own not-yet-prefilled work, found by the benchmark)', () => {
  it('drains first-come first-served at the prefill rate', () => {
    expect(prefillBacklogTokens([], 100, 0.5)).toBe(0);
    expect(prefillBacklogTokens([res(0, 1000)], 100, 0.5)).toBe(800);
    // Second arrives while the first is still being prefilled: work adds up.
    expect(prefillBacklogTokens([res(100, 1000), res(0, 1000)], 200, 0.5)).toBe(1600);
    // An idle gap is not banked as credit.
    expect(prefillBacklogTokens([res(0, 100), res(10_000, 1000)], 10_000, 0.5)).toBe(1000);
  });

  it('is between 0 and the total, and never grows with time', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ at: fc.integer({ min: 0, max: 10_000 }), u: fc.integer({ min: 0, max: 20_000 }) }),
          { maxLength: 20 },
        ),
        fc.integer({ min: 0, max: 5_000 }),
        (rs, dt) => {
          const list = rs.map((r) => res(r.at, r.u));
          const now = 10_000;
          const b = prefillBacklogTokens(list, now, 0.3);
          expect(b).toBeGreaterThanOrEqual(0);
          expect(b).toBeLessThanOrEqual(rs.reduce((s, r) => s + r.u, 0) + 1e-6);
          expect(prefillBacklogTokens(list, now + dt, 0.3)).toBeLessThanOrEqual(b + 1e-6);
        },
      ),
    );
  });

  it('depends on the reservations, not on the order they are listed in (sorted lists are not copied)', () => {
    const cal = { prefillMsPerToken: 0.3, attentionMsPerToken2: 1e-6 } as Parameters<
      typeof prefillBacklogMs
    >[2];
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ at: fc.integer({ min: 0, max: 10_000 }), u: fc.integer({ min: 0, max: 20_000 }) }),
          { maxLength: 30 },
        ),
        fc.integer(),
        (rs, seed) => {
          const sorted = rs.map((r) => res(r.at, r.u)).sort((a, b) => a.atMs - b.atMs);
          // A deterministic shuffle of the same reservations.
          const shuffled = [...sorted].sort(
            (a, b) => ((a.atMs * 31 + seed) % 17) - ((b.atMs * 31 + seed) % 17),
          );
          expect(prefillBacklogTokens(shuffled, 12_000, 0.3)).toBeCloseTo(
            prefillBacklogTokens(sorted, 12_000, 0.3),
            6,
          );
          expect(prefillBacklogMs(shuffled, 12_000, cal)).toBeCloseTo(
            prefillBacklogMs(sorted, 12_000, cal),
            6,
          );
        },
      ),
    );
  });
});
