import { describe, expect, it } from 'vitest';
import { MemoryKvIndex, type KvIndex } from '../../../src/index/index.js';
import { SHARED_RESERVATIONS_READ, SharedReservations } from '../../../src/router/shared-reservations.js';

const M = 'm';
const r = (podId: string, atMs: number, uncachedTokens = 100) => ({
  podId,
  atMs,
  uncachedTokens,
  promptTokens: 200,
});

describe('SharedReservations: one router’s reservations seen by the others', () => {
  it('gives each router the others’ live reservations by pod, not its own, until they end', async () => {
    const index = new MemoryKvIndex();
    const [a, b] = [new SharedReservations(index, 15_000), new SharedReservations(index, 15_000)];
    a.share(M, 1, r('pod-a', 1000));
    a.share(M, 2, r('pod-b', 1100, 300));
    b.share(M, 1, r('pod-a', 1200));
    await new Promise((res) => setImmediate(res));
    expect(await b.others(M, 2000)).toEqual(
      new Map([
        ['pod-a', [r('pod-a', 1000)]],
        ['pod-b', [r('pod-b', 1100, 300)]],
      ]),
    );
    expect(await a.others(M, 2000)).toEqual(new Map([['pod-a', [r('pod-a', 1200)]]]));
    a.end(1);
    a.end(99); // unknown: nothing
    await new Promise((res) => setImmediate(res));
    expect(await b.others(M, 2000)).toEqual(new Map([['pod-b', [r('pod-b', 1100, 300)]]]));
    // Older than the TTL: gone for the readers.
    expect(await b.others(M, 1100 + 15_001)).toEqual(new Map());
  });

  it('reads only the newest ones', async () => {
    const index = new MemoryKvIndex();
    const [a, b] = [new SharedReservations(index, 60_000), new SharedReservations(index, 60_000)];
    for (let i = 0; i < SHARED_RESERVATIONS_READ + 10; i++) a.share(M, i + 1, r('pod-a', 1000 + i));
    await new Promise((res) => setImmediate(res));
    const seen = (await b.others(M, 2000))!.get('pod-a')!;
    expect(seen).toHaveLength(SHARED_RESERVATIONS_READ);
    expect(seen[0]!.atMs).toBe(1010);
  });

  it('an index that cannot share leaves each router with its own: no throw, no read', async () => {
    const broken = {
      shareReservation: () => {
        throw new Error('not here');
      },
      endReservation: () => Promise.reject(new Error('down')),
      sharedReservations: () => Promise.reject(new Error('down')),
    } as unknown as KvIndex;
    const s = new SharedReservations(broken, 15_000);
    expect(() => s.share(M, 1, r('pod-a', 1000))).not.toThrow();
    expect(() => s.end(1)).not.toThrow();
    expect(await s.others(M, 2000)).toBeNull();
  });
});
