import { describe, expect, it } from 'vitest';
import type { Collector } from '../../../src/collector/collector.js';
import { waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  cachedBlocks,
  freshTokens,
  hashCounter,
  MODEL,
  startCollector,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { collectorRig } from '../../helpers/collector/collector-rig.js';

/**
 * The collector's writes against a Redis that stalls, loses its data, or goes back to an older snapshot
 * while the collector keeps running (docs/redis-index.md, "Failure behaviour").
 */
const hashes = hashCounter(1n << 44n);

describe('collector against Redis trouble (real Redis, ZMQ)', () => {
  const rig = collectorRig({ keyPrefix: 'kloss', commandTimeoutMs: 200, verifyIntervalMs: 100 });

  async function start(podId: string): Promise<NonNullable<ReturnType<Collector['worker']>>> {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }).bind();
    rig.collector = startCollector(rig.index, [
      {
        id: podId,
        model: MODEL,
        address: '127.0.0.1:18020',
        kv_events: rig.pub.endpoint,
        kv_events_replay: rig.pub.replayEndpoint,
      },
    ]);
    await rig.collector.start();
    await waitSubscribed(rig.pub, () => rig.collector.worker(podId));
    return rig.collector.worker(podId)!;
  }

  it('a write that timed out while Redis stalled is retried, and counted once', async () => {
    const w = await start('pod-s');
    const tokens = freshTokens(3);
    const h = hashes(3);
    await rig.redis.client.client('PAUSE', 800, 'ALL');
    await rig.pub.publish([{ type: 'BlockStored', hashes: h, parent: null, tokens, blockSize: BS }]);
    await waitFor('the write timed out', () => w.stats.applyErrors > 0);
    await waitCached(rig.index, 'pod-s', tokens, 3);
    await rig.pub.publish([
      { type: 'BlockRemoved', hashes: [h[2]!] },
      { type: 'BlockRemoved', hashes: [h[1]!] },
      { type: 'BlockRemoved', hashes: [h[0]!] },
    ]);
    await waitCached(rig.index, 'pod-s', tokens, 0);
    expect(w.stats.podClears.recovery).toBe(0);
  });

  it('FLUSHALL under an idle pod: found by the periodic check, the pod is rebuilt from its replay buffer', async () => {
    const w = await start('pod-f');
    const tokens = freshTokens(2);
    await rig.pub.publish([{ type: 'BlockStored', hashes: hashes(2), parent: null, tokens, blockSize: BS }]);
    await waitCached(rig.index, 'pod-f', tokens, 2);
    await rig.redis.client.flushall();
    await waitFor('loss found', () => w.queue.losses.missing === 1);
    await waitCached(rig.index, 'pod-f', tokens, 2); // no new event needed
    expect(w.stats.podClears.recovery).toBe(1);
    await waitFor('resync done', () => !w.resyncing);
    const text = await rig.collector.metrics.registry.metrics();
    expect(text).toContain('kinference_collector_index_lost_total{pod="pod-f",reason="missing"} 1');
  });

  it('Redis killed and started again empty under an idle pod: rebuilt on the reconnection, no new event needed', async () => {
    const w = await start('pod-k');
    const tokens = freshTokens(3);
    await rig.pub.publish([{ type: 'BlockStored', hashes: hashes(3), parent: null, tokens, blockSize: BS }]);
    await waitCached(rig.index, 'pod-k', tokens, 3);
    const published = rig.pub.seq;
    await rig.redis.kill();
    await rig.redis.restart();
    // The collector knows what it wrote: the loss is found once Redis answers, and the replay refills the pod.
    await waitFor('loss found', () => w.queue.losses.missing === 1, 30_000);
    await waitCached(rig.index, 'pod-k', tokens, 3);
    await waitFor('resync done', () => !w.resyncing);
    expect(rig.pub.seq).toBe(published); // nothing published meanwhile
    expect(w.stats.podClears.recovery).toBe(1);
  });

  it('back to an older snapshot: a chain evicted since does not come back', async () => {
    const w = await start('pod-r');
    const tokens = freshTokens(3);
    const h = hashes(3);
    await rig.pub.publish([{ type: 'BlockStored', hashes: h, parent: null, tokens, blockSize: BS }]);
    await waitCached(rig.index, 'pod-r', tokens, 3);
    // An RDB snapshot now...
    const snap: [Buffer, Buffer][] = [];
    for (const k of await rig.redis.client.keysBuffer('kloss:*'))
      snap.push([k, (await rig.redis.client.dumpBuffer(k))!]);
    // ...vLLM evicts the chain...
    await rig.pub.publish([{ type: 'BlockRemoved', hashes: [...h].reverse() }]);
    await waitCached(rig.index, 'pod-r', tokens, 0);
    // ...and Redis comes back from the snapshot.
    await rig.redis.client.flushall();
    for (const [k, v] of snap) await rig.redis.client.restore(k, 0, v, 'REPLACE');
    expect(await cachedBlocks(rig.index, 'pod-r', tokens)).toBe(3); // stale
    await waitFor('loss found', () => w.queue.losses.rolled_back === 1);
    await waitFor('rebuilt', async () => !w.resyncing && w.stats.podClears.recovery === 1);
    await w.queue.drained();
    expect(await cachedBlocks(rig.index, 'pod-r', tokens)).toBe(0);
  });

  it('Redis loses the pod during a replay: the pod stays resyncing until the recovery has rebuilt it', async () => {
    const w = await start('pod-l');
    const tokens = freshTokens(2);
    await rig.pub.publish([{ type: 'BlockStored', hashes: hashes(2), parent: null, tokens, blockSize: BS }]);
    await waitCached(rig.index, 'pod-l', tokens, 2);
    // Every resyncing flag the worker writes, with how many recovery rebuilds had started by then.
    const flags: { resyncing: boolean; recoveries: number }[] = [];
    const upsert = rig.index.upsertPodState.bind(rig.index);
    rig.index.upsertPodState = (pod, patch) => {
      if (pod.podId === 'pod-l' && patch.resyncing !== undefined)
        flags.push({ resyncing: patch.resyncing, recoveries: w.stats.podClears.recovery });
      return upsert(pod, patch);
    };
    try {
      // A gap starts a replay; while the collector waits for it, Redis loses everything.
      rig.pub.beforeReplay = async () => {
        rig.pub.beforeReplay = null;
        await rig.redis.client.flushall();
        await waitFor('loss found', () => w.queue.losses.missing === 1);
      };
      await rig.pub.publish([{ type: 'AllBlocksCleared' }], { drop: true });
      await rig.pub.publish([]);
      await waitFor('rebuilt', () => w.stats.podClears.recovery === 1 && !w.resyncing, 10_000);
      await waitCached(rig.index, 'pod-l', tokens, 0); // the replay carried the clear
      const early = flags.filter((f) => !f.resyncing && f.recoveries === 0);
      expect(flags.some((f) => f.resyncing)).toBe(true);
      expect(early).toEqual([]);
      expect((await rig.index.listPods(MODEL)).find((p) => p.podId === 'pod-l')?.resyncing).toBe(false);
    } finally {
      rig.index.upsertPodState = upsert;
    }
  });
});
