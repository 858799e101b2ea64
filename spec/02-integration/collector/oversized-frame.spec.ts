import { describe, expect, it } from 'vitest';
import { requestReplay } from '../../../src/collector/transport/replay-client.js';
import { waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import { liveFrames } from '../../helpers/collector/vllm-frames.js';
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
 * Issue #33: the size of one ZMQ frame a pod may send the collector is bounded (`zmq_max_frame_bytes`, ZMQ
 * maxMessageSize), live and in replay answers, against a real ZMQ publisher and a real Redis. libzmq refuses
 * a larger frame from its header, before buffering it, and drops the connection for good (a protocol error):
 * the collector counts it, connects again, and the stream goes on.
 */
const hashes = hashCounter(1n << 45n);
const LIMIT = 65_536;
const OVERSIZED = 4 * 1024 * 1024;

describe('ZMQ frames over zmq_max_frame_bytes (real ZMQ, real Redis)', () => {
  const rig = collectorRig({ keyPrefix: 'kbig', commandTimeoutMs: 2000 });

  it(
    'a live frame over the bound is refused and counted; the collector reconnects and indexes what follows',
    { timeout: 90_000 },
    async () => {
      rig.pub = await new FakeVllmPublisher({ format: 'map' }).bind();
      rig.collector = startCollector(
        rig.index,
        [
          {
            id: 'pod-big',
            model: MODEL,
            address: '127.0.0.1:18021',
            kv_events: rig.pub.endpoint,
            kv_events_replay: rig.pub.replayEndpoint,
          },
        ],
        { zmq_max_frame_bytes: LIMIT, replay_timeout_ms: 500 },
      );
      await rig.collector.start();
      const w = await (async () => {
        await waitSubscribed(rig.pub, () => rig.collector.worker('pod-big'));
        return rig.collector.worker('pod-big')!;
      })();
      const a = freshTokens(2);
      await rig.pub.publish([
        { type: 'BlockStored', hashes: hashes(2), parent: null, tokens: a, blockSize: BS },
      ]);
      await waitCached(rig.index, 'pod-big', a, 2);
      expect(w.stats.framesRefused).toBe(0);

      // A batch far over the bound, kept in the engine's replay buffer as vLLM would keep it.
      await rig.pub.publishPayload(Buffer.alloc(OVERSIZED, 0x90));
      await waitFor('the frame refused and counted', () => w.stats.framesRefused === 1, 20_000);
      await waitFor('connected again', () => w.connected, 20_000);

      // The stream goes on: the next batch is indexed (a gap past the refused one: cleared and restarted there).
      const b = freshTokens(2);
      await waitFor(
        'the next batch indexed',
        async () => {
          if ((await cachedBlocks(rig.index, 'pod-big', b)) === 2) return true;
          if (w.connected && !w.resyncing)
            await rig.pub.publish([
              { type: 'BlockStored', hashes: hashes(2), parent: null, tokens: b, blockSize: BS },
            ]);
          return false;
        },
        30_000,
        300,
      );
      expect(w.stats.framesRefused).toBe(1);
      const text = await rig.collector.metrics.registry.metrics();
      expect(text).toContain('kinference_collector_frames_refused_total{pod="pod-big"} 1');
      // A frame at the bound is still taken: the bound refuses only what is over it.
      const received = w.stats.framesReceived;
      await rig.pub.sendRaw(liveFrames('', rig.pub.seq + 1000, Buffer.alloc(LIMIT, 0x90)));
      await waitFor('a frame at the bound received', () => w.stats.framesReceived > received);
      expect(w.stats.framesRefused).toBe(1);
    },
  );

  it('a replay answer with a frame over the bound ends at it (timeout after the items before), never buffered', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }).bind();
    await rig.pub.publish([]);
    await rig.pub.publishPayload(Buffer.alloc(OVERSIZED, 0x90));
    await rig.pub.publish([]);
    const seqs: number[] = [];
    const outcome = await requestReplay(
      rig.pub.replayEndpoint,
      0,
      1000,
      (m) => {
        seqs.push(m.seq);
        return true;
      },
      LIMIT,
    );
    expect(outcome).toEqual({ kind: 'timeout', items: 1 });
    expect(seqs).toEqual([0]);
    // Under a bound that fits, the same buffer replays whole.
    const all = await requestReplay(rig.pub.replayEndpoint, 0, 5000, () => true, OVERSIZED + 1024);
    expect(all).toEqual({ kind: 'complete', items: 3 });
  });
});
