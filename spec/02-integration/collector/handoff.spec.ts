import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { XPublisher, type Publisher } from 'zeromq';
import type { StreamWorker } from '../../../src/collector/stream-worker.js';
import type { CollectorSection } from '../../../src/config/collector-section.js';
import type { PodConfig } from '../../../src/config/fleet-config.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  MODEL,
  blockStored,
  cachedBlocks,
  freshTokens,
  hashCounter,
  publishChain,
  startCollector,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { collectorRig } from '../../helpers/collector/collector-rig.js';
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';
import { observerIndex } from '../../helpers/observer-index.js';

/**
 * Handoffs (src/collector/handoff.ts): a collector that stops cleanly leaves each pod's stream state in
 * Redis, and the next one goes on from the pod's replay buffer instead of clearing the pod. Real Redis, real
 * ZeroMQ (a vLLM-shaped PUB + ROUTER whose replay buffer has lost the engine's first batches, so that only
 * a handoff can keep what they stored).
 */

const hashes = hashCounter(11n << 40n);

/**
 * A publisher whose PUB socket is an XPUB: `subscribed` resolves when the collector's SUB has subscribed, so
 * the engine's first batch (seq 0) reaches it live. waitSubscribed's probe batches would use up sequence
 * numbers instead, and with a 3-batch buffer a slow join under load pushed seq 0 out before the collector saw
 * it: the pod then stayed partial, which is not what these tests set up.
 */
async function xpubPublisher(
  bufferSteps: number,
): Promise<{ pub: FakeVllmPublisher; subscribed: Promise<unknown> }> {
  const pub = new FakeVllmPublisher({ format: 'map' }, { bufferSteps });
  pub.pub.close();
  const x = new XPublisher({ linger: 0 });
  pub.pub = x as unknown as Publisher;
  await pub.bind();
  return { pub, subscribed: x.receive() }; // [0x01, topic]: the SUB subscribed
}

describe('collector handoff at a clean stop (real Redis and ZMQ)', () => {
  const rig = collectorRig({ keyPrefix: 'khand', index: observerIndex });

  const pod = (id: string, p: FakeVllmPublisher, extra: Partial<PodConfig> = {}): PodConfig => ({
    id,
    model: MODEL,
    address: '127.0.0.1:18091',
    kv_events: p.endpoint,
    kv_events_replay: p.replayEndpoint,
    ...extra,
  });
  const start = async (p: PodConfig, over: Partial<CollectorSection> = {}): Promise<StreamWorker> => {
    rig.collector = startCollector(rig.index, [p], over);
    await rig.collector.start();
    await waitFor('worker', () => rig.collector.worker(p.id) !== undefined);
    return rig.collector.worker(p.id)!;
  };
  const stop = async (): Promise<void> => {
    expect(await rig.collector.stop()).toBe(true);
    rig.collector = null;
  };

  const chain = (n: number, p: FakeVllmPublisher): Promise<{ t: number[]; h: bigint[] }> =>
    publishChain(p, n, hashes);

  it('the next collector goes on from the last batch: blocks whose batches the buffer lost are kept, and what came meanwhile is applied', async () => {
    const x = await xpubPublisher(3);
    rig.pub = x.pub;
    let w = await start(pod('pod-h', rig.pub));
    await x.subscribed;
    await waitFor('the connect-time replay answered', () => !w.resyncing);
    const a = await chain(4, rig.pub);
    await waitCached(rig.index, 'pod-h', a.t, 4);
    // The collector saw the engine from its first batch: nothing of the pod is missing from the index.
    expect(w.partialSinceMs).toBe(0);
    await stop();

    // While no collector runs: the tail block is evicted and the chain grows from a parent only the handoff
    // knows; the buffer (3 batches) no longer holds the batches that stored the first blocks.
    const b = freshTokens(2);
    const bh = hashes(2);
    await rig.pub.publish([{ type: 'BlockRemoved', hashes: [a.h[3]!] }]);
    await rig.pub.publish([blockStored(bh, a.h[2]!, b)]);

    w = await start(pod('pod-h', rig.pub));
    const grown = [...a.t.slice(0, 3 * BS), ...b];
    await waitCached(rig.index, 'pod-h', grown, 5);
    expect(await cachedBlocks(rig.index, 'pod-h', a.t)).toBe(3);
    expect(w.stats.handoffTakes.resumed).toBe(1);
    expect(w.stats.podClears.start).toBe(0);
    expect(w.stats.replays.covered).toBe(1);
    expect(w.partialSinceMs).toBe(0);
    // And the handoff was read once: a third collector, after this one was written to, clears.
    await stop();
    await rig.index.apply({ model: MODEL, podId: 'pod-h' }, [{ op: 'clear' }]);
    w = await start(pod('pod-h', rig.pub));
    await waitFor('stale', () => w.stats.handoffTakes.stale === 1);
    expect(w.stats.podClears.start).toBe(1);
    expect(w.stats.handoffTakes.resumed).toBe(0);
  });

  it('a stream quiet for handoff_checkpoint_ms saves one handoff, and another only after it changed again', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }).bind();
    const w = await start(pod('pod-c', rig.pub), { handoff_checkpoint_ms: 150 });
    await waitSubscribed(rig.pub, () => rig.collector.worker('pod-c'));
    const a = await chain(2, rig.pub);
    await waitCached(rig.index, 'pod-c', a.t, 2);
    await waitFor('first checkpoint', () => w.stats.handoffSaves.checkpointed === 1);
    const at = w.lastSeq;
    // Quiet and unchanged: the timer that saves checkpoints also refreshes the pod's lastEventAtMs (every
    // second while idle); two refreshes later, still one checkpoint.
    const fresh = async (): Promise<number> =>
      (await rig.index.listPods(MODEL)).find((p) => p.podId === 'pod-c')!.lastEventAtMs;
    const t0 = await fresh();
    await waitFor('two idle refreshes', async () => (await fresh()) > t0 + 1000, 10_000, 50);
    expect(w.stats.handoffSaves.checkpointed).toBe(1);
    await chain(1, rig.pub);
    await waitFor('second checkpoint', () => w.stats.handoffSaves.checkpointed === 2);
    expect(w.lastSeq).toBe(at! + 1);
    expect(w.stats.handoffSaves.failed + w.stats.handoffSaves.not_ready).toBe(0);
  });

  it('without a handoff (handoff: false, or the pod written since) the pod is cleared and rebuilt from what the buffer still holds', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }, { bufferSteps: 3 }).bind();
    await start(pod('pod-o', rig.pub), { handoff: false });
    await waitSubscribed(rig.pub, () => rig.collector.worker('pod-o'));
    const a = await chain(5, rig.pub);
    await waitCached(rig.index, 'pod-o', a.t, 5);
    await stop(); // saves nothing

    const w = await start(pod('pod-o', rig.pub));
    await waitFor('rebuilt', () => w.stats.replays.partial === 1 && !w.resyncing);
    expect(w.stats.handoffTakes.none).toBe(1);
    expect(w.stats.podClears.start).toBe(1);
    expect(await cachedBlocks(rig.index, 'pod-o', a.t)).toBe(0); // block 0's batch is gone from the buffer
    expect(w.partialSinceMs).toBeGreaterThan(0);
  });

  it('an engine that restarted while no collector ran is seen at once: the old blocks go, the new process is rebuilt', async () => {
    rig.pub = await new FakeVllmPublisher({ format: 'map' }).bind();
    // Published before the collector starts: its first replay returns them, so it knows the buffer keeps
    // batches (vLLM buffer_steps > 0), and an empty answer later means a new process.
    const a = await chain(3, rig.pub);
    await start(pod('pod-r', rig.pub));
    await waitCached(rig.index, 'pod-r', a.t, 3);
    await stop();

    rig.pub.restart(); // sequence from 0, an empty buffer
    const n = await chain(2, rig.pub);
    const w = await start(pod('pod-r', rig.pub));
    await waitCached(rig.index, 'pod-r', n.t, 2);
    await waitCached(rig.index, 'pod-r', a.t, 0);
    expect(w.stats.handoffTakes.resumed).toBe(1);
    expect(w.stats.restarts).toBe(1);
    expect(w.stats.podClears.restart).toBe(1);
    expect(w.partialSinceMs).toBe(0); // rebuilt from the new process's seq 0
  });

  it('an idle engine that restarted meanwhile is caught by its new process start time in /metrics', async () => {
    let startTime = 1.7e9;
    const port = await freePort();
    rig.server = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'text/plain; version=0.0.4' })
        .end(vllmExposition({ '0': { running: 0 } }, `process_start_time_seconds ${startTime}\n`));
    });
    await new Promise<void>((r) => rig.server.listen(port, '127.0.0.1', () => r()));
    rig.pub = await new FakeVllmPublisher({ format: 'map' }, { replay: false }).bind();
    const cfg: PodConfig = {
      id: 'pod-m',
      model: MODEL,
      address: '127.0.0.1:18092',
      kv_events: rig.pub.endpoint,
      metrics: `http://127.0.0.1:${port}/metrics`,
    };
    await start(cfg);
    await waitSubscribed(rig.pub, () => rig.collector.worker('pod-m'));
    await waitFor('first scrape', () => rig.collector.scraper('pod-m')!.lastPod !== null);
    const a = await chain(2, rig.pub);
    await waitCached(rig.index, 'pod-m', a.t, 2);
    await stop();

    // A new process that has published nothing yet, and no replay endpoint to ask: nothing in the event
    // stream shows the restart, only the start time does.
    rig.pub.restart();
    startTime += 60;
    const w = await start(cfg);
    await waitCached(rig.index, 'pod-m', a.t, 0);
    expect(w.stats.handoffTakes.resumed).toBe(1);
    expect(w.stats.podClears.restart_signal).toBe(1);
    expect(w.stats.podClears.start).toBe(0);
  });
});
