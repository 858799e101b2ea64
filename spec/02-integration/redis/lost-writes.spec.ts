import { describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import {
  RedisKvIndex,
  type IndexLog,
  type IndexLossReason,
  type IndexOp,
  type PodRef,
} from '../../../src/index/index.js';
import { chain } from '../../conformance/chains.js';
import { waitFor } from '../../helpers/ports.js';
import { useRedisIndexes } from '../../helpers/redis-indexes.js';

const fx = useRedisIndexes('lost', { verifyIntervalMs: 0 });
const index = fx.index.bind(fx);

/**
 * Redis can lose what the collector wrote without the collector writing anything wrong: a restart with no
 * persistence, FLUSHALL, a restart from an older RDB snapshot. The index must notice (on its next write
 * to the pod, after a reconnection, or on its periodic check) and tell the pod's owner, once per loss.
 */
const M = 'Qwen/Qwen3-8B';
const A: PodRef = { model: M, podId: 'pod-a' };
const B: PodRef = { model: M, podId: 'pod-b' };
const keys = chain('lost writes', 8);
const store = (n = 4): IndexOp[] => [{ op: 'store', keys: keys.slice(0, n), tier: 'GPU' }];

function recordingLog(): IndexLog & { lines: string[] } {
  const lines: string[] = [];
  const rec = (msg: string) => lines.push(msg);
  return { lines, info: rec, warn: rec, error: rec };
}

function losses(ix: RedisKvIndex, pod: PodRef): IndexLossReason[] {
  const seen: IndexLossReason[] = [];
  ix.onWritesLost(pod, (r) => seen.push(r));
  return seen;
}

/** DUMP of every key under the index's prefix: what an RDB snapshot taken now would bring back. */
async function snapshot(prefix: string): Promise<[Buffer, Buffer][]> {
  const out: [Buffer, Buffer][] = [];
  for (const k of await fx.redis.client.keysBuffer(`${prefix}:*`))
    out.push([k, (await fx.redis.client.dumpBuffer(k))!]);
  return out;
}

async function restoreSnapshot(prefix: string, snap: [Buffer, Buffer][]): Promise<void> {
  const now = await fx.redis.client.keysBuffer(`${prefix}:*`);
  if (now.length > 0) await fx.redis.client.del(...now);
  for (const [k, v] of snap) await fx.redis.client.restore(k, 0, v, 'REPLACE');
}

async function gpu(ix: RedisKvIndex, pod: PodRef = A): Promise<number> {
  return (await ix.lookup(M, keys)).pods.find((p) => p.state.podId === pod.podId)?.prefixBlocks.GPU ?? -1;
}

describe('RedisKvIndex: writes Redis lost are detected', () => {
  it('FLUSHALL under an idle pod: the periodic check reports it once; the rebuild is then tracked again', async () => {
    const log = recordingLog();
    const ix = index({ verifyIntervalMs: 30, log });
    const seen = losses(ix, A);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store());
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual([]); // nothing lost, nothing reported
    await fx.redis.client.flushall();
    await waitFor('loss reported', () => seen.length > 0);
    expect(seen).toEqual(['missing']);
    expect(log.lines.filter((l) => l.startsWith('Redis no longer holds'))).toHaveLength(1);
    // The owner rebuilds: clear, then what the pod holds. Checked again from there on.
    await ix.upsertPodState(A, {});
    await ix.apply(A, [{ op: 'clear' }, ...store(2)]);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual(['missing']);
    expect(await gpu(ix)).toBe(2);
    await fx.redis.client.flushall();
    await waitFor('second loss reported', () => seen.length > 1);
    expect(seen).toEqual(['missing', 'missing']);
  });

  it('the next write to a flushed pod writes nothing, rejects, and reports the loss once', async () => {
    const ix = index();
    const seen = losses(ix, A);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store());
    await fx.redis.client.flushall();
    const e = await ix.apply(A, store(6)).then(
      () => null,
      (err: unknown) => err,
    );
    expect(isKinferenceError(e, 'KINF_ERR_REDIS')).toBe(true);
    expect(String(e)).toMatch(/missing/);
    expect(await fx.redis.client.dbsize()).toBe(0); // nothing written on top of the hole
    expect(seen).toEqual(['missing']);
    await ix.upsertPodState(A, {});
    await ix.apply(A, [{ op: 'clear' }, ...store(3)]); // the rebuild is accepted
    expect(await gpu(ix)).toBe(3);
    expect(seen).toEqual(['missing']);
  });

  it('a restart with no data: found right after the reconnection; one log line per transition', async () => {
    const log = recordingLog();
    const ix = index({ log });
    const seen = losses(ix, A);
    const seenB = losses(ix, B);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store());
    await ix.upsertPodState(B, {}); // registered, never written: nothing to lose
    await fx.redis.kill();
    for (let i = 0; i < 5; i++) await ix.lookup(M, keys).catch(() => {});
    await new Promise((r) => setTimeout(r, 300)); // several reconnection attempts fail meanwhile
    await fx.redis.restart();
    await waitFor('loss reported after the reconnection', () => seen.length > 0);
    expect(seen).toEqual(['missing']);
    expect(seenB).toEqual([]);
    expect(log.lines.filter((l) => l.startsWith('Redis connection lost'))).toHaveLength(1);
    expect(log.lines.filter((l) => l.startsWith('Redis connection restored'))).toHaveLength(1);
    expect(log.lines.filter((l) => l.startsWith('Redis connected'))).toHaveLength(1);
  });

  it('a restart from an older snapshot: the writes made since are reported rolled back', async () => {
    const ix = index({ keyPrefix: 'rollback' });
    const seen = losses(ix, A);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store());
    const snap = await snapshot('rollback');
    await ix.apply(A, [{ op: 'remove', keys: keys.slice(0, 4), tier: 'GPU' }]); // vLLM evicted them
    expect(await gpu(ix)).toBe(0);
    await ix.verify();
    expect(seen).toEqual([]);
    await restoreSnapshot('rollback', snap);
    expect(await gpu(ix)).toBe(4); // the evicted chain is back: stale
    await ix.verify();
    expect(seen).toEqual(['rolled_back']);
    await ix.verify();
    expect(seen).toEqual(['rolled_back']); // once
  });

  it('another writer on the pod: reported as overwritten', async () => {
    const ix = index({ keyPrefix: 'overwrite' });
    const other = index({ keyPrefix: 'overwrite' });
    const seen = losses(ix, A);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store());
    await other.apply(A, store(), { writer: 'someone-else', seq: 1 });
    await ix.verify();
    expect(seen).toEqual(['overwritten']);
  });

  it('a pod removed since the snapshot: removed again when the snapshot brings it back', async () => {
    const log = recordingLog();
    const ix = index({ keyPrefix: 'ghost', log });
    await ix.upsertPodState(A, {});
    await ix.upsertPodState(B, {});
    await ix.apply(B, store());
    const snap = await snapshot('ghost');
    await ix.removePod(B);
    expect((await ix.listPods(M)).map((p) => p.podId)).toEqual(['pod-a']);
    await restoreSnapshot('ghost', snap);
    expect((await ix.listPods(M)).map((p) => p.podId)).toEqual(['pod-a', 'pod-b']);
    await ix.verify();
    expect((await ix.listPods(M)).map((p) => p.podId)).toEqual(['pod-a']);
    expect(log.lines.filter((l) => l.startsWith('a removed pod is back'))).toHaveLength(1);
    // Registered again by its owner: no longer a removed pod.
    await ix.upsertPodState(B, {});
    await ix.verify();
    expect((await ix.listPods(M)).map((p) => p.podId)).toEqual(['pod-a', 'pod-b']);
  });

  it('no false alarm: checks running between concurrent writes of several pods report nothing', async () => {
    const ix = index({ verifyIntervalMs: 1 });
    const pods = ['p1', 'p2', 'p3'].map((podId) => ({ model: M, podId }));
    const seen = pods.map((p) => losses(ix, p));
    await Promise.all(
      pods.map(async (p) => {
        await ix.upsertPodState(p, {});
        for (let i = 0; i < 60; i++) {
          await ix.apply(p, store(1 + (i % 8)));
          if (i % 7 === 0) await ix.verify();
        }
      }),
    );
    await ix.verify();
    expect(seen).toEqual([[], [], []]);
  });

  it('a read-only index (the plugin) never checks anything', async () => {
    const ix = index({ verifyIntervalMs: 5, keyPrefix: 'readonly' });
    await ix.lookup(M, keys);
    await fx.redis.client.config('RESETSTAT');
    await new Promise((r) => setTimeout(r, 100));
    await ix.lookup(M, keys);
    const stats = await fx.redis.client.info('commandstats');
    expect(stats).not.toMatch(/cmdstat_hmget/);
  });
});
