import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BlockKey, Reservation } from '../../../src/core/types.js';
import {
  MAX_KEYED_PER_POD,
  MAX_KEYS_KEPT,
  MAX_KEYS_PER_RESERVATION,
  ReservationBook,
} from '../../../src/router/reservations.js';

const k = (...names: string[]): BlockKey[] => names as BlockKey[];
const res = (podId: string, atMs: number): Reservation => ({
  podId,
  atMs,
  uncachedTokens: 100,
  promptTokens: 100,
});

/** Chained keys like the router's: block i's key names every token up to the end of block i. */
function chained(blocks: readonly number[]): BlockKey[] {
  return blocks.map((_, i) => blocks.slice(0, i + 1).join('.') as BlockKey);
}

describe('ReservationBook.pendingPrefixBlocks (prompts sent to a pod, not yet in its KV events)', () => {
  it('is the longest shared prefix of a live reservation on that pod, in blocks (hand-computed)', () => {
    const book = new ReservationBook(10_000);
    const a = book.add(res('pod-a', 0), k('s1', 's2', 's3', 'q1'))!;
    book.add(res('pod-a', 10), k('s1', 's2', 'x3'));
    book.add(res('pod-b', 20), k('s1'));
    const query = k('s1', 's2', 's3', 'q2', 'q3');
    expect(book.pendingPrefixBlocks('pod-a', query, 100)).toBe(3); // s1 s2 s3 from the first
    expect(book.pendingPrefixBlocks('pod-b', query, 100)).toBe(1);
    expect(book.pendingPrefixBlocks('pod-c', query, 100)).toBe(0);
    expect(book.pendingPrefixBlocks('pod-a', k('t1', 's2', 's3'), 100)).toBe(0); // chained: s1 decides
    expect(book.pendingPrefixBlocks('pod-a', k(), 100)).toBe(0);
    // A prompt shorter than the reservation's: capped at its own length.
    expect(book.pendingPrefixBlocks('pod-a', k('s1', 's2'), 100)).toBe(2);

    book.release(a); // its response came back: the KV events have it now, or it was evicted
    expect(book.pendingPrefixBlocks('pod-a', query, 100)).toBe(2); // s1 s2 from the second
    // After the TTL nothing is credited (10 + 10,000 ≤ 10,010).
    expect(book.pendingPrefixBlocks('pod-a', query, 10_010)).toBe(0);
    expect(book.pendingPrefixBlocks('pod-b', query, 10_019)).toBe(1);
  });

  it('reservations without keys (fallback routing) or with TTL 0 credit nothing', () => {
    const book = new ReservationBook(10_000);
    book.add(res('pod-a', 0));
    expect(book.pendingPrefixBlocks('pod-a', k('s1'), 1)).toBe(0);
    const off = new ReservationBook(0);
    expect(off.add(res('pod-a', 0), k('s1'))).toBeNull();
    expect(off.pendingPrefixBlocks('pod-a', k('s1'), 1)).toBe(0);
  });

  it(`only the newest ${MAX_KEYED_PER_POD} reservations of a pod keep their keys`, () => {
    const book = new ReservationBook(1_000_000);
    book.add(res('pod-a', 0), k('old', 'o2'));
    for (let i = 1; i < MAX_KEYED_PER_POD; i++) book.add(res('pod-a', i), k(`n${i}`));
    expect(book.pendingPrefixBlocks('pod-a', k('old', 'o2'), 1_000)).toBe(2);
    book.add(res('pod-a', MAX_KEYED_PER_POD), k('newest'));
    expect(book.pendingPrefixBlocks('pod-a', k('old', 'o2'), 1_000)).toBe(0);
    expect(book.pendingPrefixBlocks('pod-a', k('newest'), 1_000)).toBe(1);
    expect(book.pendingPrefixBlocks('pod-a', k('n1'), 1_000)).toBe(1);
  });

  it('equals the brute-force longest common prefix over live reservations (chained keys)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 8 }), { maxLength: 12 }),
        fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 8 }),
        (prompts, mine) => {
          const book = new ReservationBook(1_000);
          prompts.forEach((p, i) => book.add(res('pod-a', i), chained(p)));
          const q = chained(mine);
          let want = 0;
          for (const p of prompts) {
            let n = 0;
            while (n < p.length && n < mine.length && p[n] === mine[n]) n++;
            want = Math.max(want, n);
          }
          expect(book.pendingPrefixBlocks('pod-a', q, 100)).toBe(want);
        },
      ),
    );
  });

  it('finds every keyed reservation after releases, though it walks only the newest of a long list', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.integer({ min: 0, max: 5 }), fc.constant(-1)), {
          minLength: MAX_KEYED_PER_POD + 20,
          maxLength: MAX_KEYED_PER_POD + 120,
        }),
        fc.integer({ min: 0, max: 5 }),
        (ops, probe) => {
          // The book's own rule, modelled: an add drops the keys of the reservation MAX_KEYED_PER_POD + 1
          // from the end; -1 releases the newest one still held (responses end out of order as well).
          const book = new ReservationBook(1_000_000);
          const model: { id: number; keys: BlockKey[] | null }[] = [];
          ops.forEach((op, i) => {
            if (op === -1) {
              const gone = model.splice(Math.max(0, model.length - 1 - (i % 7)), 1)[0];
              if (gone) book.release(gone.id);
              return;
            }
            const keys = chained([op, i % 3]);
            model.push({ id: book.add(res('pod-a', i), keys)!, keys });
            const dropped = model[model.length - 1 - MAX_KEYED_PER_POD];
            if (dropped) dropped.keys = null;
          });
          const q = chained([probe, 0]);
          let want = 0;
          for (const m of model) {
            if (!m.keys) continue;
            let n = 0;
            while (n < m.keys.length && m.keys[n] === q[n]) n++;
            want = Math.max(want, n);
          }
          expect(book.pendingPrefixBlocks('pod-a', q, ops.length)).toBe(want);
        },
      ),
      { numRuns: 50 },
    );
  });

  it('keeps at most MAX_KEYS_KEPT block keys in all, and a long prompt only its first keys', () => {
    const book = new ReservationBook(60_000);
    const long = (tag: string, n: number): BlockKey[] =>
      Array.from({ length: n }, (_, i) => `${tag}${i}` as BlockKey);
    // A burst of the longest prompts to one pod: 256 × 8192 keys were kept before.
    for (let i = 0; i < MAX_KEYED_PER_POD; i++) book.add(res('pod-a', i), long(`p${i}-`, 8192));
    expect(book.keyCount).toBeLessThanOrEqual(MAX_KEYS_KEPT);
    const huge = long('h', MAX_KEYS_PER_RESERVATION * 3);
    book.add(res('pod-b', 1000), huge);
    // Its prefix still earns credit, up to the keys it kept.
    expect(book.pendingPrefixBlocks('pod-b', huge, 1000)).toBe(MAX_KEYS_PER_RESERVATION);
    expect(book.keyCount).toBeLessThanOrEqual(MAX_KEYS_KEPT);
  });
});
