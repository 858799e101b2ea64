import { describe, expect, it } from 'vitest';
import type { PodConfig } from '../../../src/config/fleet-config.js';
import type { PodState } from '../../../src/core/types.js';
import { waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  MODEL,
  blockStored,
  cachedBlocks,
  freshTokens,
  hashCounter,
  publishChain,
  startCollector,
  waitCached,
} from '../../helpers/collector/collector-harness.js';
import { collectorRig } from '../../helpers/collector/collector-rig.js';
import { observerIndex } from '../../helpers/observer-index.js';

/**
 * PodState.partialSinceMs: the collector says when a pod's rebuilt index may lack blocks the pod still holds
 * (its replay did not reach the engine's first batch), which is when the plugin asks vLLM to re-announce the
 * blocks requests reuse; and such a re-announcement (BlockStored from block 0, no parent) indexes them again.
 */

const hashes = hashCounter(7n << 40n);

describe('partial rebuilds (real Redis and ZMQ)', () => {
  const rig = collectorRig({ keyPrefix: 'kpart', index: observerIndex });

  const pod = (id: string, p: FakeVllmPublisher, replay = true): PodConfig => ({
    id,
    model: MODEL,
    address: '127.0.0.1:18090',
    kv_events: p.endpoint,
    ...(replay ? { kv_events_replay: p.replayEndpoint } : {}),
  });
  const state = async (id: string): Promise<PodState | undefined> =>
    (await rig.index.listPods(MODEL)).find((s) => s.podId === id);

  it("a replay from the engine's first batch rebuilds the whole index: not partial", async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }).bind();
    const { t } = await publishChain(rig.pub, 3, hashes);
    rig.collector = startCollector(rig.index, [pod('pod-full', rig.pub)]);
    await rig.collector.start();
    await waitCached(rig.index, 'pod-full', t, 3);
    await waitFor('complete', async () => (await state('pod-full'))?.partialSinceMs === 0);
    expect(rig.collector.worker('pod-full')!.partialSinceMs).toBe(0);
  });

  it('a replay buffer that lost the first batches leaves the pod partial, and a re-announcement indexes the lost blocks again', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }, { bufferSteps: 2 }).bind();
    const old = freshTokens(2);
    const oldHashes = hashes(2);
    await rig.pub.publish([blockStored(oldHashes, null, old)]); // seq 0, gone from the buffer by the time we ask
    const later = freshTokens(2);
    await rig.pub.publish([blockStored(hashes(2), null, later)]);
    await rig.pub.publish([]);
    const t0 = Date.now();
    rig.collector = startCollector(rig.index, [pod('pod-part', rig.pub)]);
    await rig.collector.start();
    await waitCached(rig.index, 'pod-part', later, 2);
    const s = await state('pod-part');
    expect(s!.partialSinceMs).toBeGreaterThanOrEqual(t0);
    expect(s!.partialSinceMs).toBeLessThanOrEqual(Date.now());
    expect(rig.collector.worker('pod-part')!.partialSinceMs).toBe(s!.partialSinceMs);
    const metrics = await rig.collector.metrics.registry.metrics();
    expect(metrics).toContain(
      `kinference_collector_partial_since_seconds{pod="pod-part"} ${s!.partialSinceMs / 1000}`,
    );
    expect(await cachedBlocks(rig.index, 'pod-part', old)).toBe(0);

    // vLLM with kv_cache_report_mode=full, for a request reusing the old prefix: one BlockStored from block 0.
    await rig.pub.publish([blockStored(oldHashes, null, old)]);
    await waitCached(rig.index, 'pod-part', old, 2);
    // Still partial: other old blocks may be out there; the plugin's window bounds the reports.
    expect((await state('pod-part'))!.partialSinceMs).toBe(s!.partialSinceMs);
  });

  it('without a replay endpoint, a pod that published before we subscribed is partial', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'array' }, { replay: false }).bind();
    await rig.pub.publish([blockStored(hashes(1), null, freshTokens(1))], { drop: true }); // before us: seq 0 lost
    rig.collector = startCollector(rig.index, [pod('pod-live', rig.pub, false)]);
    await rig.collector.start();
    const t = freshTokens(1);
    await waitFor('subscribed and indexed', async () => {
      if ((await cachedBlocks(rig.index, 'pod-live', t)) === 1) return true;
      await rig.pub.publish([blockStored(hashes(1), null, t)]);
      return false;
    });
    expect((await state('pod-live'))!.partialSinceMs).toBeGreaterThan(0);
  });
});
