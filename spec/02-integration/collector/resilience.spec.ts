import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { Collector } from '../../../src/collector/collector.js';
import { freePort, waitFor } from '../../helpers/ports.js';
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
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';

const hashes = hashCounter(1n << 40n);

describe('collector resilience (real Redis, ZMQ, HTTP)', () => {
  const rig = collectorRig({ keyPrefix: 'kres', commandTimeoutMs: 300 });

  it('Redis down: buffers up to the bound, drops and suspends, then clears and rebuilds from replay when back', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }).bind();
    rig.collector = startCollector(
      rig.index,
      [
        {
          id: 'pod-r',
          model: MODEL,
          address: '127.0.0.1:18010',
          kv_events: rig.pub.endpoint,
          kv_events_replay: rig.pub.replayEndpoint,
        },
      ],
      {
        max_queued_ops: 20,
      },
    );
    await rig.collector.start();
    const w = (): NonNullable<ReturnType<Collector['worker']>> => rig.collector.worker('pod-r')!;
    await waitSubscribed(rig.pub, () => rig.collector.worker('pod-r'));
    const first = freshTokens(2);
    const fh = hashes(2);
    await rig.pub.publish([{ type: 'BlockStored', hashes: fh, parent: null, tokens: first, blockSize: BS }]);
    await waitCached(rig.index, 'pod-r', first, 2);

    await rig.redis.kill();
    const during = freshTokens(1);
    let parent = fh[1]!;
    await waitFor('write queue overflow', async () => {
      const [h] = hashes(1);
      await rig.pub.publish([
        { type: 'BlockStored', hashes: [h!], parent, tokens: freshTokens(1), blockSize: BS },
      ]);
      parent = h!;
      return w().queue.suspended;
    });
    expect(w().stats.applyErrors).toBeGreaterThan(0);
    // While suspended, live batches are dropped (the recovery replay brings them back).
    await waitFor('live batches dropped', async () => {
      if (w().stats.liveDropped > 0) return true;
      await rig.pub.publish([
        { type: 'BlockStored', hashes: hashes(1), parent: null, tokens: during, blockSize: BS },
      ]);
      return false;
    });

    await rig.redis.restart(); // empty: the index lost everything
    await waitCached(rig.index, 'pod-r', first, 2); // rebuilt from the replay buffer (from 0)
    await waitCached(rig.index, 'pod-r', during, 1);
    expect(w().stats.overflows).toBe(1);
    expect(w().stats.podClears.recovery).toBe(1);
    expect(w().stats.droppedOps).toBeGreaterThan(0);
    const [state] = await rig.index.listPods(MODEL);
    expect(state).toMatchObject({ podId: 'pod-r', address: '127.0.0.1:18010', resyncing: false });
  });

  it('replays on every (re)connection: a batch published while disconnected is indexed with no later traffic', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'array' }).bind();
    rig.collector = startCollector(rig.index, [
      {
        id: 'pod-r',
        model: MODEL,
        address: '127.0.0.1:18013',
        kv_events: rig.pub.endpoint,
        kv_events_replay: rig.pub.replayEndpoint,
      },
    ]);
    await rig.collector.start();
    await waitSubscribed(rig.pub, () => rig.collector.worker('pod-r'));
    const w = rig.collector.worker('pod-r')!;
    const replaysBefore = rig.pub.replayRequests;
    // Published while the subscriber is cut off: only the replay buffer has it, and the pod then goes quiet.
    const missed = freshTokens(2);
    await rig.pub.reconnect(async () => {
      await rig.pub.publish(
        [{ type: 'BlockStored', hashes: hashes(2), parent: null, tokens: missed, blockSize: BS }],
        { drop: true },
      );
    });
    await waitCached(rig.index, 'pod-r', missed, 2);
    expect(rig.pub.replayRequests).toBeGreaterThan(replaysBefore);
    expect(w.stats.podClears.gap ?? 0).toBe(0);
  });

  it('a gap older than the replay buffer: clears the pod, keeps what the buffer still holds', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'array' }, { bufferSteps: 2 }).bind();
    rig.collector = startCollector(rig.index, [
      {
        id: 'pod-p',
        model: MODEL,
        address: '127.0.0.1:18012',
        kv_events: rig.pub.endpoint,
        kv_events_replay: rig.pub.replayEndpoint,
      },
    ]);
    await rig.collector.start();
    await waitSubscribed(rig.pub, () => rig.collector.worker('pod-p'));
    const before = freshTokens(2);
    await rig.pub.publish([
      { type: 'BlockStored', hashes: hashes(2), parent: null, tokens: before, blockSize: BS },
    ]);
    await waitCached(rig.index, 'pod-p', before, 2);

    const lost = freshTokens(1);
    await rig.pub.publish(
      [{ type: 'BlockStored', hashes: hashes(1), parent: null, tokens: lost, blockSize: BS }],
      { drop: true },
    );
    for (let i = 0; i < 3; i++) await rig.pub.publish([], { drop: true }); // pushes `lost` out of the 2-batch buffer
    const kept = freshTokens(1);
    await rig.pub.publish(
      [{ type: 'BlockStored', hashes: hashes(1), parent: null, tokens: kept, blockSize: BS }],
      { drop: true },
    );
    const live = freshTokens(1);
    await rig.pub.publish([
      { type: 'BlockStored', hashes: hashes(1), parent: null, tokens: live, blockSize: BS },
    ]);

    await waitCached(rig.index, 'pod-p', live, 1);
    const w = rig.collector.worker('pod-p')!;
    expect(w.stats.replays.partial).toBe(1);
    expect(w.stats.podClears.gap).toBe(1);
    expect(await cachedBlocks(rig.index, 'pod-p', kept)).toBe(1); // in the buffer: replayed
    expect(await cachedBlocks(rig.index, 'pod-p', lost)).toBe(0); // gone from the buffer: never indexed
    expect(await cachedBlocks(rig.index, 'pod-p', before)).toBe(0); // may have been evicted meanwhile: cleared
  });

  it('scrapes /metrics into pod state; K failures → unhealthy, success → healthy; a new process start time → restart', async () => {
    let status = 200;
    let startTime = 1.7e9;
    const port = await freePort();
    rig.server = createServer((_req, res) => {
      const body = vllmExposition(
        { '0': { running: 3, waiting: 5, kv: 0.42, prompt: 1000, hits: 200, prefillN: 4, prefillS: 0.8 } },
        `vllm:cache_config_info{block_size="16",num_gpu_blocks="1234"} 1.0\nprocess_start_time_seconds ${startTime}\n`,
      );
      res
        .writeHead(status, { 'content-type': 'text/plain; version=0.0.4' })
        .end(status === 200 ? body : 'boom');
    });
    await new Promise<void>((r) => rig.server.listen(port, '127.0.0.1', () => r()));
    rig.pub = await new FakeVllmPublisher({ format: 'array' }).bind();
    rig.collector = startCollector(
      rig.index,
      [
        {
          id: 'pod-m',
          model: MODEL,
          address: '127.0.0.1:18011',
          kv_events: rig.pub.endpoint,
          kv_events_replay: rig.pub.replayEndpoint,
          metrics: `http://127.0.0.1:${port}/metrics`,
        },
      ],
      { unhealthy_after_failures: 3 },
    );
    await rig.collector.start();
    const state = async (): Promise<Record<string, unknown> | undefined> =>
      (await rig.index.listPods(MODEL)).find((p) => p.podId === 'pod-m') as
        Record<string, unknown> | undefined;
    await waitFor('scraped state', async () => (await state())?.waiting === 5);
    expect(await state()).toMatchObject({
      running: 3,
      waiting: 5,
      kvUsage: 0.42,
      kvCapacityTokens: 1234 * 16, // num_gpu_blocks × block_size, from cache_config_info
      healthy: true,
      meanQueuedPrefillTokens: 0,
    });
    expect(((await state())?.lastScrapeAtMs as number) > 0).toBe(true);

    status = 500;
    await waitFor('unhealthy', async () => (await state())?.healthy === false);
    expect(rig.collector.scraper('pod-m')!.consecutiveFailures).toBeGreaterThanOrEqual(3);
    status = 200;
    await waitFor('healthy again', async () => (await state())?.healthy === true);

    await waitSubscribed(rig.pub, () => rig.collector.worker('pod-m'));
    startTime += 60;
    await waitFor(
      'restart signal',
      () => rig.collector.worker('pod-m')!.stats.podClears.restart_signal === 1,
    );
    const text = await rig.collector.metrics.registry.metrics();
    expect(text).toContain('kinference_collector_vllm_cache_config{pod="pod-m",field="num_gpu_blocks"} 1234');
  });
});
