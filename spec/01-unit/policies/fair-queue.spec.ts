import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { FairQueue, VirtualCounters } from '../../../src/policies/index.js';

const queues: FairQueue[] = [];
afterEach(() => {
  for (const q of queues.splice(0)) q.drain();
});

function queue(counters = new VirtualCounters(), maxWaiters?: number): FairQueue {
  // A poll far beyond the test: only explicit wakes move the queue.
  const q = new FairQueue(counters, { pollMs: 3_600_000, ...(maxWaiters ? { maxWaiters } : {}) });
  queues.push(q);
  return q;
}

/** Wakes the queue until empty; returns the tenants in the order they were woken. */
async function order(q: FairQueue, waits: { tenant: string; p: Promise<void> }[]): Promise<string[]> {
  const out: string[] = [];
  waits.forEach((w) => void w.p.then(() => out.push(w.tenant)));
  while (q.size > 0) {
    q.wake();
    await Promise.resolve();
    await Promise.resolve();
  }
  await Promise.all(waits.map((w) => w.p));
  return out;
}

describe('fairness within a band (policies/fair-queue.ts)', () => {
  it('wakes the higher priority first, then the tenant that has cost the GPUs least, then the oldest', async () => {
    const c = new VirtualCounters();
    c.charge('heavy', 50_000);
    c.charge('light', 1_000);
    const q = queue(c);
    const waits = [
      { tenant: 'heavy', p: q.wait('heavy', -1, 60_000)! },
      { tenant: 'light', p: q.wait('light', -1, 60_000)! },
      { tenant: 'vip', p: q.wait('vip', 5, 60_000)! },
      { tenant: 'light2', p: q.wait('light', -1, 60_000)! },
    ];
    expect(await order(q, waits)).toEqual(['vip', 'light', 'light2', 'heavy']);
  });

  it('charges uncached work only: a tenant whose prompts hit the cache goes before one whose prompts do not', async () => {
    const c = new VirtualCounters();
    // Same raw prompt tokens (10 × 4,000): cached-hit tenant is charged its 100 new tokens + 200 output each.
    for (let i = 0; i < 10; i++) {
      c.charge('cache-friendly', 100 + 200);
      c.charge('cache-hostile', 4000 + 200);
    }
    const q = queue(c);
    const waits = [
      { tenant: 'cache-hostile', p: q.wait('cache-hostile', 0, 60_000)! },
      { tenant: 'cache-friendly', p: q.wait('cache-friendly', 0, 60_000)! },
    ];
    expect(await order(q, waits)).toEqual(['cache-friendly', 'cache-hostile']);
  });

  it('lifts a tenant back from idle to the band’s waiting level (it cannot spend credit saved while nobody competed)', () => {
    const c = new VirtualCounters();
    c.charge('busy', 10_000);
    const q = queue(c);
    void q.wait('busy', -1, 60_000);
    void q.wait('newcomer', -1, 60_000);
    expect(c.get('newcomer')).toBe(10_000);
    // Another band does not lift it.
    void q.wait('other-band', 3, 60_000);
    expect(c.get('other-band')).toBe(0);
  });

  it('is bounded: waiters past the cap are refused, counters forget the least recently charged tenant', () => {
    const q = queue(new VirtualCounters(), 2);
    expect(q.wait('a', 0, 60_000)).not.toBeNull();
    expect(q.wait('b', 0, 60_000)).not.toBeNull();
    expect(q.wait('c', 0, 60_000)).toBeNull();
    expect(q.wait('d', 0, 0)).toBeNull();
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.nat(1000)), { maxLength: 300 }),
        (charges) => {
          const c = new VirtualCounters(16);
          for (const [t, n] of charges) c.charge(`t${t}`, n);
          expect(c.size).toBeLessThanOrEqual(16);
          const last = charges.at(-1);
          if (last) expect(c.get(`t${last[0]}`)).toBeGreaterThanOrEqual(last[1]);
        },
      ),
    );
  });

  it('a waiter whose time is up is released by its own deadline', async () => {
    const q = queue();
    const t0 = Date.now();
    await q.wait('a', -1, 30)!;
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25);
    expect(q.size).toBe(0);
  });
});
