import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisSentinel, type RedisSentinelSetup } from '../../../harness/redis-sentinel.js';
import type { RedisServer } from '../../../harness/redis-server.js';
import type { Collector } from '../../../src/collector/collector.js';
import { type KvIndex } from '../../../src/index/index.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  cachedBlocks,
  freshTokens,
  hashCounter,
  startCollector,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { waitFor } from '../../helpers/ports.js';
import { startRedisCluster, type TestCluster } from '../../helpers/redis-cluster.js';
import { MODEL } from '../../helpers/collector/collector-harness.js';
import { observerIndex } from '../../helpers/observer-index.js';

/**
 * A failover whose promoted replica missed the last writes (replication is asynchronous), under a running
 * collector: the collector notices (its apply records, redis-write-loss.ts) and rebuilds each pod from its
 * replay buffer, so the index ends equal to a model of the pods' caches. On Redis Sentinel (a primary, a
 * replica, three sentinels) and on a Redis Cluster (a replica added to the model's shard).
 */
const hashes = hashCounter(1n << 45n);

/** Where the index lives, with the failover to make: the replica cut off, the primary killed. */
interface Backend {
  index: KvIndex;
  /** The primary holding the model, and its replica (which the failover promotes). */
  primary(): Promise<{ server: RedisServer; admin: { call(...a: string[]): Promise<unknown> } }>;
  replica(): Promise<{ server: RedisServer }>;
  /** Resolves when the replica serves as the model's primary. */
  promoted(): Promise<void>;
  inSync(): Promise<boolean>;
  stop(): Promise<void>;
}

async function sentinelBackend(prefix: string): Promise<Backend> {
  const s: RedisSentinelSetup = await startRedisSentinel({ replicas: 1 });
  const index = observerIndex({
    kind: 'redis',
    url: s.url,
    sentinel: { nodes: s.sentinelAddresses, master: s.master },
    keyPrefix: prefix,
    commandTimeoutMs: 500,
    verifyIntervalMs: 100,
  });
  let old = -1;
  return {
    index,
    async primary() {
      old = await s.primary();
      return s.nodes[old]!;
    },
    async replica() {
      return s.nodes[1 - (await s.primary())]!;
    },
    promoted: async () => void (await s.promotedAfter(old)),
    inSync: () => s.replicasInSync(),
    async stop() {
      await index.close();
      await s.stop();
    },
  };
}

async function clusterBackend(prefix: string): Promise<Backend> {
  const c: TestCluster = await startRedisCluster(3);
  const slot = await c.slotOfModel(MODEL);
  const owner = await c.ownerOf(slot);
  const url = await c.urlAvoiding(MODEL);
  const replica = await c.addReplica(owner);
  const index = observerIndex({
    kind: 'redis',
    url,
    cluster: true,
    keyPrefix: prefix,
    commandTimeoutMs: 500,
    verifyIntervalMs: 100,
  });
  return {
    index,
    primary: async () => c.nodes[owner]!,
    replica: async () => replica,
    promoted: () =>
      waitFor(
        'the replica serves the slot',
        async () => (await c.ownerOf(slot)) === c.nodes.indexOf(replica),
        30_000,
        50,
      ).then(() => undefined),
    async inSync() {
      const off = (info: string, f: string): string | undefined => new RegExp(`${f}:(\\d+)`).exec(info)?.[1];
      const p = off(await c.nodes[owner]!.admin.info('replication'), 'master_repl_offset');
      return p !== undefined && p === off(await replica.admin.info('replication'), 'slave_repl_offset');
    },
    async stop() {
      await index.close();
      await c.stop();
    },
  };
}

describe.each([
  { name: 'Redis Sentinel', start: sentinelBackend },
  { name: 'a Redis Cluster', start: clusterBackend },
])('collector on $name: a failover that lost writes is repaired', ({ start }) => {
  let b: Backend;
  let collector: Collector;
  const pubs: Record<string, FakeVllmPublisher> = {};
  /** The model: every chain each pod's engine published, and whether the engine still holds it. */
  const model: { pod: string; tokens: number[]; h: bigint[]; held: boolean }[] = [];

  const store = async (pod: string, blocks: number): Promise<void> => {
    const tokens = freshTokens(blocks);
    const h = hashes(blocks);
    await pubs[pod]!.publish([{ type: 'BlockStored', hashes: h, parent: null, tokens, blockSize: BS }]);
    model.push({ pod, tokens, h, held: true });
  };
  const evict = async (i: number): Promise<void> => {
    const c = model[i]!;
    await pubs[c.pod]!.publish([{ type: 'BlockRemoved', hashes: [...c.h].reverse() }]);
    c.held = false;
  };
  /** Chains whose index entry differs from the model (as "pod:chain got/want"). */
  const differences = async (): Promise<string[]> => {
    const out: string[] = [];
    for (const [i, c] of model.entries()) {
      const got = await cachedBlocks(b.index, c.pod, c.tokens);
      const want = c.held ? c.h.length : 0;
      if (got !== want) out.push(`${c.pod}:${i} ${got}/${want}`);
    }
    return out;
  };
  const indexEqualsModel = (what: string): Promise<boolean> =>
    waitFor(what, async () => (await differences()).length === 0, 30_000, 100);

  beforeAll(async () => {
    b = await start(`kfo${Math.floor(Math.random() * 1e6)}`);
    for (const id of ['pod-a', 'pod-b']) pubs[id] = await new FakeVllmPublisher({ format: 'map' }).bind();
    collector = startCollector(
      b.index,
      Object.entries(pubs).map(([id, p], i) => ({
        id,
        model: MODEL,
        address: `127.0.0.1:${18030 + i}`,
        kv_events: p.endpoint,
        kv_events_replay: p.replayEndpoint,
      })),
    );
    await collector.start();
    for (const id of Object.keys(pubs)) await waitSubscribed(pubs[id]!, () => collector.worker(id));
  }, 90_000);
  afterAll(async () => {
    await collector?.stop();
    await Promise.all(Object.values(pubs).map((p) => p.close()));
    await b?.stop();
  });

  it('the index equals the pods’ caches after the promoted replica missed writes', async () => {
    await store('pod-a', 4);
    await store('pod-a', 3);
    await store('pod-b', 5);
    await indexEqualsModel('the first writes are indexed');
    await waitFor('the replica has them', () => b.inSync(), 30_000, 50);

    const primary = await b.primary();
    const replica = await b.replica();
    // Cut the replica off (paused, its link dropped by the primary), so what follows never reaches it.
    replica.server.pause();
    try {
      await primary.admin.call('CLIENT', 'KILL', 'TYPE', 'replica');
      await evict(0); // pod-a's first chain leaves its cache...
      await store('pod-a', 2); // ...a new one comes...
      await store('pod-b', 6);
      await indexEqualsModel('the primary has the new writes');
      await primary.server.kill();
    } finally {
      replica.server.resume();
    }
    // Engines go on while there is no primary: these writes fail, and come back through the replay.
    await store('pod-b', 3);
    await evict(1);
    await b.promoted();

    await indexEqualsModel('the index equals the model after the failover');
    const lost = ['pod-a', 'pod-b'].map((id) => collector.worker(id)!.queue.losses);
    // Each pod's loss was noticed (the replica holds an older apply record of the same writer).
    for (const l of lost) expect(l.rolled_back + l.missing).toBeGreaterThanOrEqual(1);
    // And it stays equal: new events land on the rebuilt index.
    await store('pod-a', 2);
    await evict(2);
    await indexEqualsModel('new events after the repair');
    expect(await differences()).toEqual([]);
  }, 90_000);
});
