import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PendingDecisions, type PendingDecision } from '../../../plugins/kinference/pending.js';
import type { RouteOutcome } from '../../../src/router/index.js';

const outcome = {} as RouteOutcome;
const at = (accessEndMs: number): PendingDecision => ({ outcome, span: null, accessEndMs });

describe('PendingDecisions (access → log hand-over)', () => {
  it('gives each decision back once', () => {
    const p = new PendingDecisions();
    p.put('a', at(1));
    expect(p.take('a')?.accessEndMs).toBe(1);
    expect(p.take('a')).toBeUndefined();
  });

  it('never holds more than its bound, dropping the oldest first', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 100 }), (max, n) => {
        const p = new PendingDecisions(max, 1e12);
        for (let i = 0; i < n; i++) p.put(`k${i}`, at(i));
        expect(p.size).toBe(Math.min(n, max));
        if (n > max) expect(p.take(`k${n - max - 1}`)).toBeUndefined();
        if (n > 0) expect(p.take(`k${n - 1}`)?.accessEndMs).toBe(n - 1);
      }),
    );
  });

  it('drops entries older than the TTL (their log phase never came)', () => {
    const p = new PendingDecisions(100, 1000);
    p.put('old', at(0));
    p.put('mid', at(600));
    p.put('new', at(1500));
    expect(p.take('old')).toBeUndefined();
    expect(p.take('mid')).toBeDefined();
  });

  it('releases and counts every decision it drops, by TTL on a sweep or by the entry bound', () => {
    const released: string[] = [];
    const p = new PendingDecisions(2, 1000);
    const put = (id: string, t: number) => p.put(id, { ...at(t), release: () => released.push(id) });
    put('a', 0);
    put('b', 10);
    put('c', 20); // over the bound: a goes
    expect(released).toEqual(['a']);
    expect(p.sweep(500)).toBe(0);
    expect(p.sweep(1015)).toBe(1); // b is past the TTL, c not yet
    expect(p.sweep(5000)).toBe(1);
    expect(released).toEqual(['a', 'b', 'c']);
    expect(p.stats()).toEqual({ size: 0, expired: 2, evicted: 1 });
    expect(p.take('c')).toBeUndefined();
  });
});
