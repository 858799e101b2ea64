import { describe, expect, it } from 'vitest';
import type { BlockKey } from '../../../src/core/types.js';
import type { PodRef } from '../../../src/index/index.js';
import { KEY_SUFFIX } from '../../../src/index/redis-keys.js';
import { useRedisIndexes } from '../../helpers/redis-indexes.js';

/**
 * Handoff records in Redis (src/index/lua/handoff.ts): they can be tens of MB, so they move in 1 MiB pieces
 * around an O(1) rename, never as one command that would stall the routers' lookups. Real redis-server with
 * a 2 MiB client-query-buffer-limit: a client sending the record in one command would be disconnected.
 */
const fx = useRedisIndexes('handoff', { verifyIntervalMs: 0 });
const M = 'Qwen/Qwen3-8B';
const A: PodRef = { model: M, podId: 'pod-a' };

describe('RedisKvIndex handoff transfer', () => {
  it('moves a multi-MiB record in pieces, multibyte characters across piece boundaries intact, and leaves no transfer key', async () => {
    const client = fx.redis.client;
    const old = (await client.config('GET', 'client-query-buffer-limit')) as string[];
    await client.config('SET', 'client-query-buffer-limit', String(2 << 20));
    try {
      const ix = fx.index({ blockTtlSeconds: 3600 });
      await ix.upsertPodState(A, {});
      // 3.5 MiB of 3-byte characters: piece boundaries fall inside characters.
      const record = `{"x":"${'€'.repeat(Math.ceil((3.5 * (1 << 20)) / 3))}"}`;
      expect(await ix.saveHandoff(A, record)).toBe(true);
      const base = ix.keyBase(M);
      expect(await client.keys(`${base}${KEY_SUFFIX.handoffTransfer}*`)).toEqual([]);
      const saved = await client.keys(`${base}${KEY_SUFFIX.handoff}*`);
      expect(saved).toHaveLength(1);
      const ttl = await client.pttl(saved[0]!);
      expect(ttl).toBeGreaterThan(3_500_000);
      expect(ttl).toBeLessThanOrEqual(3_600_000);
      const took = await ix.takeHandoff(A);
      expect(took.kind === 'found' && took.record === record).toBe(true);
      expect(await client.keys(`${base}*h*:*`)).toEqual([]); // record, stamp and transfer keys all gone
      expect(await ix.takeHandoff(A)).toEqual({ kind: 'none' });
    } finally {
      await client.config('SET', 'client-query-buffer-limit', old[1]!);
    }
  });

  it("refuses a record taken before another write landed: it describes the pod as of this index's last write", async () => {
    const one = fx.index();
    const base = one.keyBase(M);
    const other = fx.index({ keyPrefix: base.slice(0, base.indexOf(':')) }); // the same keys, another writer
    await one.upsertPodState(A, {});
    await one.apply(A, [{ op: 'store', keys: ['00000000000000aa' as BlockKey], tier: 'GPU' }]);
    expect(await one.saveHandoff(A, 'as of one')).toBe(true);
    await other.apply(A, [{ op: 'store', keys: ['00000000000000bb' as BlockKey], tier: 'GPU' }]);
    expect(await one.saveHandoff(A, 'as of one, stale')).toBe(false);
    expect(await one.takeHandoff(A)).toEqual({ kind: 'stale' }); // the first one, written over since
    expect(await fx.redis.client.keys(`${base}*h*:*`)).toEqual([]);
    // Once it has written again, its view is current and a save goes through.
    await one.apply(A, [{ op: 'remove', keys: ['00000000000000aa' as BlockKey], tier: 'GPU' }]);
    expect(await one.saveHandoff(A, 'current')).toBe(true);
    expect(await other.takeHandoff(A)).toEqual({ kind: 'found', record: 'current' });
  });

  it('a save for a pod the index does not know stores nothing, and removePod drops a saved one', async () => {
    const ix = fx.index();
    const base = ix.keyBase(M);
    expect(await ix.saveHandoff(A, 'r')).toBe(false);
    expect(await fx.redis.client.keys(`${base}*`)).toEqual([]);
    await ix.upsertPodState(A, {});
    expect(await ix.saveHandoff(A, 'r')).toBe(true);
    await ix.removePod(A);
    expect(await fx.redis.client.keys(`${base}*h*:*`)).toEqual([]);
  });
});
