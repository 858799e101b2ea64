import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeHandoff } from '../../../src/collector/handoff.js';
import { silentLogger } from '../../../src/collector/logger.js';
import { StreamWorker } from '../../../src/collector/stream-worker.js';
import { createKvIndex, type KvIndex } from '../../../src/index/index.js';
import { waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  MODEL,
  blockStored,
  freshTokens,
  hashCounter,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';

const hashes = hashCounter(9n << 40n);

/**
 * Issue #32: a stream's time comes from the clock in its settings (`now`), not from Date.now. Set to a day in
 * 2001 and moved by hand, every time the stream writes is that clock's: the clear at start (partialSinceMs),
 * the apply time and the idle freshness (lastEventAtMs), the deadline and the stamp of its handoff.
 */
describe("a stream worker's injected clock (real ZMQ publisher and replay ROUTER)", () => {
  const T0 = Date.UTC(2001, 8, 1);
  let t = T0;
  let index: KvIndex;
  let pub: FakeVllmPublisher;
  let w: StreamWorker;
  let stopped = false;

  const podState = async () => (await index.listPods(MODEL)).find((p) => p.podId === 'pod-c');

  beforeAll(async () => {
    index = createKvIndex({ kind: 'memory' });
    pub = await new FakeVllmPublisher({ format: 'array' }).bind();
    w = new StreamWorker(
      {
        podId: 'pod-c',
        basePodId: 'pod-c',
        model: MODEL,
        address: '127.0.0.1:18047',
        rank: null,
        kvEvents: pub.endpoint,
        kvEventsReplay: pub.replayEndpoint,
        topic: '',
      },
      {
        blockSize: BS,
        blockMapMaxEntries: 10_000,
        replayTimeoutMs: 2000,
        liveBufferBatches: 1000,
        receiveHighWaterMark: 10_000,
        queue: { maxQueuedOps: 100_000, maxOpsPerApply: 1000, retryMinMs: 20, retryMaxMs: 200 },
        freshnessIntervalMs: 100,
        handoff: true,
        now: () => t,
      },
      index,
      silentLogger,
      { applied: () => {} },
    );
    w.start({ healthy: true });
  });

  afterAll(async () => {
    if (!stopped) await w?.stop(0);
    await pub?.close();
    await index?.close();
  });

  it('stamps the clear at start, applies, freshness and the handoff with it', async () => {
    // No handoff to take: the pod is cleared at start, partial since the clock's now.
    await waitFor('handoff looked for', () => w.stats.handoffTakes.none === 1);
    expect(w.partialSinceMs).toBe(T0);

    await waitSubscribed(pub, () => w);
    const tokens = freshTokens(2);
    await pub.publish([blockStored(hashes(2), null, tokens)]);
    await waitCached(index, 'pod-c', tokens, 2);
    expect((await podState())?.lastEventAtMs).toBe(T0);

    // Idle and caught up: the timer refreshes lastEventAtMs, at the clock's time.
    t = T0 + 5000;
    await waitFor('freshness at the clock', async () => (await podState())?.lastEventAtMs === T0 + 5000);

    stopped = true;
    expect(await w.stop(2000)).toBe(true);
    t = T0 + 6000;
    // The deadline is on the same clock: one second ahead of it is time enough.
    await w.saveHandoffAfterStop(t + 1000);
    expect(w.stats.handoffSaves).toMatchObject({ saved: 1, timeout: 0 });
    const take = await index.takeHandoff({ model: MODEL, podId: 'pod-c' });
    expect(take.kind).toBe('found');
    const d = take.kind === 'found' ? decodeHandoff(take.record) : null;
    expect(d?.ok && d.handoff.savedAtMs).toBe(T0 + 6000);
  });
});
