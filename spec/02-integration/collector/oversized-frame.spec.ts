import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Collector } from '../../../src/collector/collector.js';
import { requestReplay } from '../../../src/collector/transport/replay-client.js';
import { createKvIndex, type KvIndex } from '../../../src/index/index.js';
import { waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
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
  let redis: TestRedis;
  let index: KvIndex;
  let collector: Collector | null = null;
  let pub: FakeVllmPublisher | null = null;

  beforeAll(async () => {
    redis = await startRedis();
    index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kbig', commandTimeoutMs: 2000 });
  });
  afterEach(async () => {
    await collector?.stop();
    await pub?.close();
    collector = null;
    pub = null;
  });
  afterAll(async () => {
    await index?.close();
    await redis?.stop();
  });

  it(
    'a live frame over the bound is refused and counted; the collector reconnects and indexes what follows',
    { timeout: 90_000 },
    async () => {
      pub = await new FakeVllmPublisher({ format: 'map' }).bind();
      collector = startCollector(
        index,
        [
          {
            id: 'pod-big',
            model: MODEL,
            address: '127.0.0.1:18021',
            kv_events: pub.endpoint,
            kv_events_replay: pub.replayEndpoint,
          },
        ],
        { zmq_max_frame_bytes: LIMIT, replay_timeout_ms: 500 },
      );
      await collector.start();
      const w = await (async () => {
        await waitSubscribed(pub!, () => collector!.worker('pod-big'));
        return collector!.worker('pod-big')!;
      })();
      const a = freshTokens(2);
      await pub.publish([{ type: 'BlockStored', hashes: hashes(2), parent: null, tokens: a, blockSize: BS }]);
      await waitCached(index, 'pod-big', a, 2);
      expect(w.stats.framesRefused).toBe(0);

      // A batch far over the bound, kept in the engine's replay buffer as vLLM would keep it.
      await pub.publishPayload(Buffer.alloc(OVERSIZED, 0x90));
      await waitFor('the frame refused and counted', () => w.stats.framesRefused === 1, 20_000);
      await waitFor('connected again', () => w.connected, 20_000);

      // The stream goes on: the next batch is indexed (a gap past the refused one: cleared and restarted there).
      const b = freshTokens(2);
      await waitFor(
        'the next batch indexed',
        async () => {
          if ((await cachedBlocks(index, 'pod-big', b)) === 2) return true;
          if (w.connected && !w.resyncing)
            await pub!.publish([
              { type: 'BlockStored', hashes: hashes(2), parent: null, tokens: b, blockSize: BS },
            ]);
          return false;
        },
        30_000,
        300,
      );
      expect(w.stats.framesRefused).toBe(1);
      const text = await collector.metrics.registry.metrics();
      expect(text).toContain('kinference_collector_frames_refused_total{pod="pod-big"} 1');
      // A frame at the bound is still taken: the bound refuses only what is over it.
      const received = w.stats.framesReceived;
      await pub.sendRaw(liveFrames('', pub.seq + 1000, Buffer.alloc(LIMIT, 0x90)));
      await waitFor('a frame at the bound received', () => w.stats.framesReceived > received);
      expect(w.stats.framesRefused).toBe(1);
    },
  );

  it('a replay answer with a frame over the bound ends at it (timeout after the items before), never buffered', async () => {
    pub = await new FakeVllmPublisher({ format: 'map' }).bind();
    await pub.publish([]);
    await pub.publishPayload(Buffer.alloc(OVERSIZED, 0x90));
    await pub.publish([]);
    const seqs: number[] = [];
    const outcome = await requestReplay(
      pub.replayEndpoint,
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
    const all = await requestReplay(pub.replayEndpoint, 0, 5000, () => true, OVERSIZED + 1024);
    expect(all).toEqual({ kind: 'complete', items: 3 });
  });
});
