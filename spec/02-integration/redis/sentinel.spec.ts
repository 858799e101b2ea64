import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRedisSentinel, type RedisSentinelSetup } from '../../../harness/redis-sentinel.js';
import { isKinferenceError } from '../../../src/core/errors.js';
import {
  RedisKvIndex,
  type IndexLossReason,
  type PodRef,
  type RedisKvIndexOptions,
} from '../../../src/index/index.js';
import { chain } from '../../conformance/chains.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { rejection } from '../../helpers/redis-indexes.js';

/**
 * The index through Redis Sentinel (`redis_sentinels`): a real primary, two replicas and three sentinels
 * (harness/redis-sentinel.ts). The client asks the sentinels for the primary and follows each failover;
 * calls fail fast while there is none, and a promoted replica that missed writes is reported as a loss.
 * The tests run in order, each failover leaving the next a new primary.
 */
function useSentinel(replicas: number) {
  const ctx = { s: null as unknown as RedisSentinelSetup };
  beforeAll(async () => {
    ctx.s = await startRedisSentinel({ replicas });
  }, 60_000);
  afterAll(async () => {
    await ctx.s?.stop();
  });
  return ctx;
}

describe('the index through Redis Sentinel', () => {
  const ctx = useSentinel(2);
  tests(ctx, 'sn');
});

describe('the index through Redis Sentinel, one replica', () => {
  const ctx = useSentinel(1);
  tests(ctx, 'sm', true);
});

/** The tests, on a setup per describe (they run in order: each failover leaves the next a new primary). */
function tests(ctx: { s: RedisSentinelSetup }, prefixBase: string, lostWrites = false): void {
  const open: { close(): Promise<void> }[] = [];
  let n = 0;
  const keys = chain('sentinel prompt', 24);

  const index = (opts: Partial<RedisKvIndexOptions> = {}): RedisKvIndex => {
    const ix = new RedisKvIndex({
      url: ctx.s.url,
      sentinel: { nodes: ctx.s.sentinelAddresses, master: ctx.s.master },
      keyPrefix: `${prefixBase}${++n}`,
      lookupTimeoutMs: 5000,
      commandTimeoutMs: 5000,
      verifyIntervalMs: 0,
      ...opts,
    });
    open.push(ix);
    return ix;
  };
  /** A writer of model m: its losses collected, the pod registered. */
  const writer = async (m: string, verifyIntervalMs = 100) => {
    const ix = index({ verifyIntervalMs });
    const pod: PodRef = { model: m, podId: 'pod-a' };
    const losses: IndexLossReason[] = [];
    ix.onWritesLost(pod, (r) => losses.push(r));
    await ix.upsertPodState(pod, {});
    // A reader of the same index (the router's budget is 25 ms; 200 here, for a loaded machine).
    const reader = index({ keyPrefix: `${prefixBase}${n}`, lookupTimeoutMs: 200 });
    return { ix, pod, losses, reader };
  };
  const gpu = async (ix: RedisKvIndex, m: string): Promise<number[]> =>
    (await ix.lookup(m, keys)).pods.map((p) => p.prefixBlocks.GPU);

  /**
   * Lookups every 20 ms (budget 200 ms, the plugin's is 25) from before `fault` until one sees `want`
   * again: what each call gave and how long it took, and the outage as the client saw it.
   */
  const underTraffic = async (ix: RedisKvIndex, m: string, want: number[], fault: () => Promise<void>) => {
    const calls: { ok: boolean; code: string | null; ms: number; at: number }[] = [];
    let stop = false;
    const t0 = Date.now();
    const loop = (async () => {
      while (!stop) {
        const start = Date.now();
        try {
          const got = await gpu(ix, m);
          calls.push({
            ok: JSON.stringify(got) === JSON.stringify(want),
            code: null,
            ms: Date.now() - start,
            at: start - t0,
          });
        } catch (e) {
          calls.push({
            ok: false,
            code: isKinferenceError(e) ? e.code : String(e),
            ms: Date.now() - start,
            at: start - t0,
          });
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await waitFor('traffic flows', () => calls.some((c) => c.ok));
    const faultAt = Date.now() - t0;
    await fault();
    await waitFor('lookups see the index again', () => calls.some((c) => c.at > faultAt && c.ok), 30_000, 50);
    stop = true;
    await loop;
    const failed = calls.filter((c) => !c.ok);
    const firstBack = calls.find((c) => c.at > faultAt && c.ok)!;
    return { calls, failed, faultAt, recoveredAfterMs: firstBack.at - faultAt };
  };

  afterEach(async () => {
    await Promise.all(open.splice(0).map((x) => x.close()));
  });
  if (lostWrites) {
    it('a promoted replica that missed writes: the writer is told (rolled_back) and its rebuild is accepted', async () => {
      const m = 'model-d';
      const { ix, pod, losses } = await writer(m);
      await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 8), tier: 'GPU' }]);
      await waitFor('replicas in sync', () => ctx.s.replicasInSync(), 30_000, 50);
      const old = await ctx.s.primary();
      const replica = ctx.s.nodes.find((x, i) => i !== old && x.admin.status === 'ready')!;
      // The replica stops, and the primary drops its link (else the bytes already in the replica's socket
      // buffer would reach it anyway); the primary confirms more writes, then dies.
      replica.server.pause();
      try {
        await ctx.s.nodes[old]!.admin.call('CLIENT', 'KILL', 'TYPE', 'replica');
        await ix.apply(pod, [{ op: 'store', keys: keys.slice(8, 20), tier: 'GPU' }]);
        expect(await gpu(ix, m)).toEqual([20]);
        await ctx.s.nodes[old]!.server.kill();
      } finally {
        replica.server.resume();
      }
      await ctx.s.promotedAfter(old);
      await waitFor('the loss is reported', () => losses.length > 0, 30_000);
      expect(losses).toEqual(['rolled_back']);
      // What the new primary holds is what the replica had: the 8 replicated blocks.
      expect(await waitFor('lookups work', () => gpu(ix, m), 20_000, 100)).toEqual([8]);
      // The rebuild (a clear, then the pod's blocks again) is accepted, and checks start again from it.
      await ix.apply(pod, [{ op: 'clear' }, { op: 'store', keys: keys.slice(0, 20), tier: 'GPU' }]);
      expect(await gpu(ix, m)).toEqual([20]);
      expect(losses).toEqual(['rolled_back']);
    }, 60_000);
    return;
  }

  it('reads and writes the primary the sentinels name; the host of redis_url is not used', async () => {
    const { ix, pod } = await writer('model-a', 0);
    const prefix = `${prefixBase}${n - 1}`;
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 10), tier: 'GPU' }]);
    expect(await gpu(ix, 'model-a')).toEqual([10]);
    const primary = ctx.s.nodes[await ctx.s.primary()]!;
    expect((await primary.admin.keys(`${prefix}:*`)).length).toBeGreaterThan(0);
  });

  it('SENTINEL FAILOVER under traffic: calls fail fast or not at all, and the client follows the new primary', async () => {
    const m = 'model-b';
    const { ix, pod, losses, reader } = await writer(m);
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 12), tier: 'GPU' }]);
    await waitFor('replicas in sync', () => ctx.s.replicasInSync(), 30_000, 50);
    const old = await ctx.s.primary();
    const r = await underTraffic(reader, m, [12], async () => {
      await ctx.s.sentinels[0]!.admin.call('SENTINEL', 'FAILOVER', ctx.s.master);
      await ctx.s.promotedAfter(old);
    });
    console.log(
      `[sentinel] SENTINEL FAILOVER: ${r.failed.length}/${r.calls.length} lookups failed (${[...new Set(r.failed.map((c) => c.code))].join(', ') || 'none'}), index back ${r.recoveredAfterMs} ms after the command`,
    );
    // Each failure was an index error, quick: the router routes on load and goes on.
    for (const c of r.failed) {
      expect(['KINF_ERR_REDIS', 'KINF_ERR_REDIS_TIMEOUT']).toContain(c.code);
      expect(c.ms).toBeLessThan(2000); // the budget (200 ms), with room for a loaded machine: not hanging
    }
    // Writes go to the new primary (the demoted one would answer READONLY).
    await waitFor(
      'a write lands on the new primary',
      async () => {
        await ix.apply(pod, [{ op: 'store', keys: keys.slice(12, 16), tier: 'GPU' }]);
        return true;
      },
      20_000,
      100,
    );
    expect(await gpu(ix, m)).toEqual([16]);
    expect(losses).toEqual([]);
  }, 60_000);

  it('primary killed under traffic: lookups fail fast, then the promoted replica serves every replicated write', async () => {
    const m = 'model-c';
    const { ix, pod, losses, reader } = await writer(m);
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 14), tier: 'GPU' }]);
    await waitFor('replicas in sync', () => ctx.s.replicasInSync(), 30_000, 50);
    const old = await ctx.s.primary();
    let killedAt = 0;
    let promotedAt = 0;
    const r = await underTraffic(reader, m, [14], async () => {
      await ctx.s.nodes[old]!.server.kill();
      killedAt = Date.now();
      await ctx.s.promotedAfter(old);
      promotedAt = Date.now();
    });
    console.log(
      `[sentinel] SIGKILL of the primary: ${r.failed.length}/${r.calls.length} lookups failed (${[...new Set(r.failed.map((c) => c.code))].join(', ')}), slowest failure ${Math.max(...r.failed.map((c) => c.ms))} ms; promoted ${promotedAt - killedAt} ms after the kill, index back ${r.recoveredAfterMs} ms after it`,
    );
    expect(r.failed.length).toBeGreaterThan(0);
    for (const c of r.failed) {
      expect(['KINF_ERR_REDIS', 'KINF_ERR_REDIS_TIMEOUT']).toContain(c.code);
      expect(c.ms).toBeLessThan(2000); // the budget (200 ms), with room for a loaded machine: not hanging
    }
    await waitFor(
      'the writer writes again',
      async () => {
        await ix.apply(pod, [{ op: 'store', keys: keys.slice(14, 18), tier: 'GPU' }]);
        return true;
      },
      20_000,
      100,
    );
    expect(await gpu(ix, m)).toEqual([18]);
    expect(losses).toEqual([]);
  }, 60_000);
}

describe('no sentinel answers', () => {
  it('every call fails at once, saying so, instead of waiting out its budget', async () => {
    const ports = [await freePort(), await freePort()];
    const ix = new RedisKvIndex({
      url: 'redis://127.0.0.1:6379/0',
      sentinel: { nodes: ports.map((p) => `127.0.0.1:${p}`), master: 'kinf' },
      lookupTimeoutMs: 20_000,
    });
    try {
      const first = await rejection(ix.lookup('m', []));
      expect(isKinferenceError(first, 'KINF_ERR_REDIS')).toBe(true);
      expect(String(first)).toContain('All sentinels are unreachable');
      const t0 = Date.now();
      const again = await rejection(ix.lookup('m', []));
      expect(isKinferenceError(again, 'KINF_ERR_REDIS')).toBe(true);
      expect(Date.now() - t0).toBeLessThan(1000);
    } finally {
      await ix.close();
    }
  });
});

describe('redis sentinel settings refused', () => {
  it('sentinels with redis_cluster, no sentinel, a bad address, an empty master name', () => {
    const make = (o: Partial<RedisKvIndexOptions>) => () =>
      new RedisKvIndex({ url: 'redis://127.0.0.1:6379/0', ...o });
    const sentinel = { nodes: ['127.0.0.1:26379'], master: 'm' };
    expect(make({ sentinel, cluster: true })).toThrow(/redis_sentinels and redis_cluster are both set/);
    expect(make({ sentinel: { ...sentinel, nodes: [] } })).toThrow(/redis_sentinels: at least one sentinel/);
    expect(make({ sentinel: { ...sentinel, nodes: ['sentinel-0'] } })).toThrow(
      /redis_sentinels: "sentinel-0" is not host:port/,
    );
    expect(make({ sentinel: { ...sentinel, master: '' } })).toThrow(
      /redis_sentinel_master: "" is not a master name/,
    );
  });
});
