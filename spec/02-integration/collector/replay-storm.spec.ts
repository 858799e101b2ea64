import { beforeAll, describe, expect, it } from 'vitest';
import { REPLAY_MAX_BATCHES } from '../../../src/collector/replay-control.js';
import type { StreamWorker } from '../../../src/collector/stream-worker.js';
import { waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  blockStored,
  cachedBlocks,
  freshTokens,
  hashCounter,
  MODEL,
  startCollector,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { collectorRig } from '../../helpers/collector/collector-rig.js';
import { encodeBatch, liveFrames } from '../../helpers/collector/vllm-frames.js';

const hashes = hashCounter(5n << 40n);

/**
 * Issue #36, item 2: frames that look like an engine restart (other bytes under a number already used) or a
 * sequence jump, a few hundred of them, made one collector clear the pod and replay the whole buffer for
 * each. Now the replay buffer is asked first, and replays are coalesced and rate-limited: real ZeroMQ, real
 * Redis, the real in-process collector.
 */
describe('a storm of restart-looking frames and sequence jumps', () => {
  const rig = collectorRig({ keyPrefix: 'kstorm', lookupTimeoutMs: 2000, stopAfter: 'all' });
  const w = (): StreamWorker => rig.collector.worker('pod-s')!;

  beforeAll(async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'array' }).bind();
    rig.collector = startCollector(rig.index, [
      {
        id: 'pod-s',
        model: MODEL,
        address: '127.0.0.1:18044',
        kv_events: rig.pub.endpoint,
        kv_events_replay: rig.pub.replayEndpoint,
      },
    ]);
    await rig.collector.start();
    await waitSubscribed(rig.pub, w);
  });

  it('neither clears the pod nor replays for each frame; one coalesced replay repairs, the index is kept', async () => {
    const chains = Array.from({ length: 50 }, () => ({ t: freshTokens(2), h: hashes(2) }));
    for (const c of chains) await rig.pub.publish([blockStored(c.h, null, c.t)]);
    await waitCached(rig.index, 'pod-s', chains.at(-1)!.t, 2);
    const clearsBefore = { ...w().stats.podClears };
    const replaysBefore = rig.pub.replayRequests;

    // 300 forged frames: other bytes under numbers the engine used, and numbers far ahead of it.
    const last = rig.pub.seq - 1;
    for (let i = 0; i < 300; i++) {
      const forged = encodeBatch([blockStored(hashes(1), null, freshTokens(1))], { format: 'array' });
      const seq = i % 2 === 0 ? (i * 7) % (last + 1) : last + 2 + i * 1000;
      await rig.pub.sendRaw(liveFrames('', seq, forged));
    }
    // The engine goes on.
    const next = { t: freshTokens(2), h: hashes(2) };
    await rig.pub.publish([blockStored(next.h, null, next.t)]);
    await waitFor('the stream caught up', () => w().lastSeq === rig.pub.seq - 1 && !w().resyncing, 20_000);
    await waitCached(rig.index, 'pod-s', next.t, 2);

    expect(w().stats.podClears).toEqual(clearsBefore);
    for (const c of chains) expect(await cachedBlocks(rig.index, 'pod-s', c.t)).toBe(2);
    // A handful of replays (REPLAY_BURST at once, then one per REPLAY_MIN_INTERVAL_MS while frames keep
    // coming), never one per frame.
    const replays = rig.pub.replayRequests - replaysBefore;
    expect(replays).toBeGreaterThanOrEqual(1);
    expect(replays).toBeLessThanOrEqual(6);
    const rc = w().stats.replayControl;
    expect(rc.coalesced).toBeGreaterThan(0);
    expect(rc.refused.interval + rc.refused.budget).toBeGreaterThan(0);
    expect(w().stats.restarts).toBe(0);
  });
});

describe('a replay longer than REPLAY_MAX_BATCHES', () => {
  const rig = collectorRig({ keyPrefix: 'kbound', lookupTimeoutMs: 2000, stopAfter: 'all' });
  const w = (): StreamWorker => rig.collector.worker('pod-b')!;

  beforeAll(async () => {
    // A ROUTER that never drops (sendHighWaterMark 0): the subject is the bound, and a loaded host made the
    // default ROUTER drop batches of this 22,000-batch answer, stopping the replay there before its bound
    // (sequence-repair.spec covers that case).
    rig.pub = await new FakeVllmPublisher(
      { format: 'array' },
      { bufferSteps: 30_000, replaySendHighWaterMark: 0 },
    ).bind();
  });

  it(
    'stops at the bound and reads the rest in the next replay: nothing cleared, nothing missing',
    { timeout: 120_000 },
    async () => {
      // An engine whose buffer holds more than one replay may read, before the collector starts.
      const first = { t: freshTokens(2), h: hashes(2) };
      await rig.pub.publish([blockStored(first.h, null, first.t)], { drop: true });
      const empty = encodeBatch([], { format: 'array' });
      for (let i = 0; i < REPLAY_MAX_BATCHES + 2000; i++) await rig.pub.publishPayload(empty, { drop: true });
      const last = { t: freshTokens(2), h: hashes(2) };
      await rig.pub.publish([blockStored(last.h, null, last.t)], { drop: true });

      rig.collector = startCollector(rig.index, [
        {
          id: 'pod-b',
          model: MODEL,
          address: '127.0.0.1:18045',
          kv_events: rig.pub.endpoint,
          kv_events_replay: rig.pub.replayEndpoint,
        },
      ]);
      await rig.collector.start();
      await waitFor(
        'the whole buffer applied',
        () => w()?.lastSeq === rig.pub.seq - 1 && !w().resyncing,
        60_000,
      );
      await waitCached(rig.index, 'pod-b', last.t, 2);
      const why = JSON.stringify({
        clears: w().stats.podClears,
        replays: w().stats.replays,
        control: w().stats.replayControl,
      });
      expect(await cachedBlocks(rig.index, 'pod-b', first.t), why).toBe(2);
      expect(w().stats.replays.bounded).toBe(1);
      expect(w().stats.replayControl.refused.bounded).toBe(1);
      expect(w().stats.podClears.gap).toBe(0);
      expect(w().partialSinceMs).toBe(0);
    },
  );
});
