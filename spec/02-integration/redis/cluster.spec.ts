import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import {
  RedisKvIndex,
  RedisWriterLease,
  formatLeaseHolder,
  type IndexLossReason,
  type PodRef,
  type RedisKvIndexOptions,
} from '../../../src/index/index.js';
import { podsKey } from '../../../src/index/redis-keys.js';
import { chain } from '../../conformance/chains.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { rejection } from '../../helpers/redis-indexes.js';
import { startRedis } from '../../helpers/redis-server.js';
import { startRedisCluster, type TestCluster } from '../../helpers/redis-cluster.js';

/**
 * The index and the writer lease against a real 3-shard Redis Cluster (`redis_cluster: true`): every
 * model's keys live in one slot, the client follows the slot map from whichever node it was given.
 */
describe('the index on a Redis Cluster', () => {
  let cluster: TestCluster;
  /** One model per shard: models[i] lives on cluster.nodes[i]. */
  const models: string[] = [];
  const open: { close(): Promise<void> }[] = [];
  let n = 0;
  const keys = chain('cluster prompt', 24);

  const slotOf = (model: string): Promise<number> => cluster.slotOfModel(model);
  const index = (opts: Partial<RedisKvIndexOptions> = {}): RedisKvIndex => {
    const ix = new RedisKvIndex({
      url: cluster.nodes[0]!.url,
      cluster: true,
      keyPrefix: `cl${++n}`,
      lookupTimeoutMs: 20_000,
      commandTimeoutMs: 20_000,
      verifyIntervalMs: 0,
      ...opts,
    });
    open.push(ix);
    return ix;
  };

  /** An index writing `m` from `url`, with the losses it reports collected, and the pod registered. */
  const watched = async (m: string, url: string, verifyIntervalMs: number) => {
    const ix = index({ url, verifyIntervalMs });
    const pod: PodRef = { model: m, podId: 'pod-a' };
    const losses: IndexLossReason[] = [];
    ix.onWritesLost(pod, (r) => losses.push(r));
    await ix.upsertPodState(pod, {});
    return { ix, pod, losses };
  };

  /** A writer of `m` as the collector is: a watched index and its writer lease, taken. */
  const writer = async (m: string, url: string, verifyIntervalMs: number) => {
    const w = await watched(m, url, verifyIntervalMs);
    const lease = new RedisWriterLease({
      url,
      cluster: true,
      keyPrefix: `cl${n}`,
      models: [m],
      ttlMs: 30_000,
    });
    open.push(lease);
    expect(await lease.tryAcquire()).toEqual({ acquired: true });
    return { ...w, lease };
  };

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    const found: (string | undefined)[] = [undefined, undefined, undefined];
    for (let i = 0; found.includes(undefined); i++)
      found[await cluster.ownerOf(await slotOf(`model-${i}`))] ??= `model-${i}`;
    models.push(...(found as string[]));
  }, 30_000);
  afterEach(async () => {
    await Promise.all(open.splice(0).map((x) => x.close()));
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('serves a model on every shard through one client seeded at one node', async () => {
    const ix = index();
    for (const m of models) {
      const pod: PodRef = { model: m, podId: 'pod-a' };
      await ix.upsertPodState(pod, { address: '10.0.0.1:8000' });
      await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 10 + models.indexOf(m)), tier: 'GPU' }]);
    }
    for (const [shard, m] of models.entries()) {
      expect((await ix.lookup(m, keys)).pods.map((p) => p.prefixBlocks.GPU)).toEqual([10 + shard]);
      // The model's keys are on its own shard and on no other.
      const owners = await Promise.all(
        cluster.nodes.map((node) => node.admin.exists(podsKey(ix.keyBase(m))).catch(() => 0)),
      );
      expect(owners).toEqual([0, 1, 2].map((k) => (k === shard ? 1 : 0)));
    }
    // Once the slot map is known, a lookup is one call on the owning primary: no redirection, no other node.
    for (const [shard, m] of models.entries()) {
      await Promise.all(cluster.nodes.map((node) => node.admin.config('RESETSTAT')));
      for (let i = 0; i < 10; i++) await ix.lookup(m, keys);
      const calls = await Promise.all(
        cluster.nodes.map(async (node) =>
          Number(/cmdstat_evalsha:calls=(\d+)/.exec(await node.admin.info('commandstats'))?.[1] ?? 0),
        ),
      );
      expect(calls).toEqual([0, 1, 2].map((k) => (k === shard ? 10 : 0)));
    }
  });

  it('starts from redis_cluster_nodes when the node of redis_url does not answer (index and lease)', async () => {
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const live = cluster.nodes[1]!.url.replace(/^redis:\/\//, '');
    const m = models[2]!;
    const ix = index({ url: dead, clusterNodes: [live] });
    const pod: PodRef = { model: m, podId: 'pod-a' };
    await ix.upsertPodState(pod, {});
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 7), tier: 'GPU' }]);
    expect((await ix.lookup(m, keys)).pods.map((p) => p.prefixBlocks.GPU)).toEqual([7]);
    const lease = new RedisWriterLease({
      url: dead,
      cluster: true,
      clusterNodes: [live],
      keyPrefix: `cl${n}`,
      models: [m],
      ttlMs: 30_000,
    });
    open.push(lease);
    expect(await lease.tryAcquire()).toEqual({ acquired: true });
    // The same URL alone finds no cluster: every call fails, none hangs past its budget.
    const alone = index({ url: dead, lookupTimeoutMs: 1500, commandTimeoutMs: 1500 });
    const t0 = Date.now();
    const e = await rejection(alone.lookup(m, keys));
    expect(isKinferenceError(e, 'KINF_ERR_REDIS') || isKinferenceError(e, 'KINF_ERR_REDIS_TIMEOUT')).toBe(
      true,
    );
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('keeps serving and writing a model whose slot migrates to another shard, with no loss reported', async () => {
    const m = models[1]!;
    const { ix, pod, losses, lease } = await writer(m, cluster.nodes[0]!.url, 20);
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 12), tier: 'GPU' }]);

    await cluster.moveSlot(await slotOf(m), 2);
    expect(await cluster.ownerOf(await slotOf(m))).toBe(2);

    expect((await ix.lookup(m, keys)).pods.map((p) => p.prefixBlocks.GPU)).toEqual([12]);
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(12), tier: 'GPU' }]);
    expect((await ix.lookup(m, keys)).pods.map((p) => p.prefixBlocks.GPU)).toEqual([24]);
    expect(await lease.renew()).toEqual({ kept: true, retaken: [] });
    // Several verification rounds ran against the new shard: it holds every write, so nothing is lost.
    await new Promise((r) => setTimeout(r, 200));
    expect(losses).toEqual([]);
  });

  it('fences writes by the lease held in the model slot', async () => {
    const m = models[2]!;
    const other = { id: 'other-collector', host: 'h', pid: 1 };
    const lease = new RedisWriterLease({
      url: cluster.nodes[1]!.url,
      cluster: true,
      keyPrefix: `cl${n + 1}`,
      models: [m],
      ttlMs: 30_000,
      holder: other,
    });
    open.push(lease);
    expect(await lease.tryAcquire()).toEqual({ acquired: true });
    const ix = index({ fence: { holderValue: formatLeaseHolder({ id: 'me', host: 'h', pid: 2 }) } });
    const e = await rejection(ix.apply({ model: m, podId: 'pod-a' }, [{ op: 'clear' }]));
    expect(isKinferenceError(e, 'KINF_ERR_LEASE_LOST')).toBe(true);
  });

  it('goes on after a failover: calls fail fast while the primary is down, then the promoted replica serves everything', async () => {
    const m = models[2]!;
    const owner = await cluster.ownerOf(await slotOf(m));
    const replica = await cluster.addReplica(owner);
    const { ix, pod, losses, lease } = await writer(m, await cluster.urlAvoiding(m), 50);
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(0, 16), tier: 'GPU' }]);
    // Replicated before the primary dies, so the failover keeps it (replication is asynchronous: a
    // failover right after a write may lose it, which the writers' loss check then reports).
    const offset = (info: string, field: string): string | undefined =>
      new RegExp(`${field}:(\\d+)`).exec(info)?.[1];
    await waitFor('the replica has every write', async () => {
      const primary = offset(await cluster.nodes[owner]!.admin.info('replication'), 'master_repl_offset');
      return (
        primary !== undefined &&
        primary === offset(await replica.admin.info('replication'), 'slave_repl_offset')
      );
    });

    await cluster.nodes[owner]!.server.kill();
    const t0 = Date.now();
    expect(isKinferenceError(await rejection(ix.lookup(m, keys)), 'KINF_ERR_REDIS')).toBe(true);
    expect(Date.now() - t0).toBeLessThan(10_000);

    const back = await waitFor(
      'the promoted replica serves the model',
      async () => {
        const r = (await ix.lookup(m, keys)).pods.map((p) => p.prefixBlocks.GPU);
        return r.length > 0 ? r : null;
      },
      30_000,
      100,
    );
    expect(back).toEqual([16]);
    const promoted = await cluster.ownerOf(await slotOf(m));
    expect(promoted).not.toBe(owner);
    expect(promoted).toBe(cluster.nodes.indexOf(replica));
    await ix.apply(pod, [{ op: 'store', keys: keys.slice(16), tier: 'GPU' }]);
    expect((await ix.lookup(m, keys)).pods.map((p) => p.prefixBlocks.GPU)).toEqual([24]);
    // The lease has its own connection, which may not have seen the failover yet ("Connection is closed"):
    // the collector's keeper renews again until Redis answers, and so does this; the answer must be kept.
    const renewed = await waitFor('the lease renews after the failover', () => lease.renew(), 30_000, 100);
    expect(renewed).toEqual({ kept: true, retaken: [] });
    await new Promise((r) => setTimeout(r, 200));
    expect(losses).toEqual([]);
  }, 60_000);

  it('fails a dead shard’s calls fast, then finds the restarted shard empty and reports the loss', async () => {
    const m = models[0]!;
    const owner = await cluster.ownerOf(await slotOf(m));
    const { ix, pod, losses } = await watched(m, await cluster.urlAvoiding(m), 50);
    await ix.apply(pod, [{ op: 'store', keys, tier: 'GPU' }]);

    await cluster.nodes[owner]!.server.kill();
    const t0 = Date.now();
    const err = await rejection(ix.lookup(m, keys));
    // A refused connection, not the 20 s budget running out.
    expect(isKinferenceError(err, 'KINF_ERR_REDIS')).toBe(true);
    expect(Date.now() - t0).toBeLessThan(10_000);

    await cluster.nodes[owner]!.server.restart();
    await waitFor('the loss is reported', () => losses.length > 0, 20_000);
    expect(losses[0]).toBe('missing');
    await waitFor('the shard serves again, empty', async () => (await ix.listPods(m)).length === 0, 20_000);
  }, 60_000);
});

describe('redis_cluster set wrongly', () => {
  it('a plain client on a Cluster node: the first call for a slot the node does not serve says to set redis_cluster', async () => {
    const cluster = await startRedisCluster(3);
    const ix = new RedisKvIndex({ url: cluster.nodes[0]!.url, keyPrefix: 'plain', lookupTimeoutMs: 5000 });
    try {
      let foreign = '';
      for (let i = 0; !foreign; i++)
        if ((await cluster.ownerOf(await cluster.slotOfModel(`m${i}`))) !== 0) foreign = `m${i}`;
      const e = await rejection(ix.lookup(foreign, chain('p', 4)));
      expect(isKinferenceError(e, 'KINF_ERR_CONFIG')).toBe(true);
      expect((e as Error).message).toMatch(/MOVED \d+ .*set redis_cluster: true/);
    } finally {
      await ix.close();
      await cluster.stop();
    }
  }, 30_000);

  it('redis_cluster on a standalone Redis: every call says it is not a Cluster, at once', async () => {
    const redis = await startRedis();
    const ix = new RedisKvIndex({ url: redis.url, cluster: true, lookupTimeoutMs: 20_000 });
    try {
      const t0 = Date.now();
      for (const p of [ix.lookup('m', chain('p', 4)), ix.listPods('m')]) {
        const e = await rejection(p);
        expect(isKinferenceError(e, 'KINF_ERR_CONFIG')).toBe(true);
        expect((e as Error).message).toMatch(/not a Redis Cluster node.*unset redis_cluster/);
      }
      expect(Date.now() - t0).toBeLessThan(10_000);
    } finally {
      await ix.close();
      await redis.stop();
    }
  });

  it('a Cluster URL with a database other than 0 is refused when the index is built', () => {
    expect(() => new RedisKvIndex({ url: 'redis://127.0.0.1:7000/3', cluster: true })).toThrow(
      /only database 0/,
    );
  });
});
