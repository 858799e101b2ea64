import { describe, expect, it } from 'vitest';
import { engineProfile } from '../../../bench/lib/setup.js';
import { CollectorFeed } from '../../../bench/lib/des/feed.js';
import { SimPod } from '../../../bench/lib/des/pod.js';
import { parsePromText } from '../../../src/collector/metrics/prom-text.js';
import { engineView, extractVllmMetrics } from '../../../src/collector/metrics/vllm-metrics.js';
import { MemoryKvIndex } from '../../../src/index/index.js';

// The collector's calibration on the real emulator engine, through its /metrics text: an overload (16k
// prompts on a 35k-token cache, admitted by first chunk as vLLM did before scheduler_reserve_full_isl, so
// each prefills a few chunks, preempts itself and recomputes) must not leave the pod looking slow, and
// once the load is gone a few prefills that run alone must bring the estimate back to the pod's own cost.
describe('collector calibration through an overload and after it', () => {
  const profile = engineProfile('l40s-27b-fp8');
  const newPod = (): SimPod =>
    new SimPod(
      'pod-0',
      '10.0.0.1:8000',
      {
        profile,
        kvCapacityTokens: 35_328,
        blockSize: 16,
        eosTokenId: 2,
        outputVocab: Array.from({ length: 500 }, (_, i) => 1000 + i),
        reserveFullIsl: false,
      },
      7,
    );
  let uid = 0;
  const prompt = (n: number): number[] => {
    const base = 3000 + (uid++ % 997) * 61;
    return Array.from({ length: n }, (_, i) => base + ((i * 7919) % 90_000));
  };

  /** Runs the pod until idle, scraping every second; returns the time of the last scrape. */
  const drain = async (pod: SimPod, feed: CollectorFeed, from: number): Promise<number> => {
    let nextScrape = Math.ceil((from + 1) / 1000) * 1000;
    for (let t = pod.engine.nextEventTimeMs(); t !== null; t = pod.engine.nextEventTimeMs()) {
      while (nextScrape <= t) {
        await feed.scrape(pod, nextScrape);
        nextScrape += 1000;
      }
      for (const o of pod.engine.advanceTo(t)) if (o.kind === 'step') pod.noteStep(o);
    }
    await feed.scrape(pod, nextScrape);
    return nextScrape;
  };
  const calibration = async (index: MemoryKvIndex) =>
    (await index.listPods('m')).find((p) => p.podId === 'pod-0')!.calibration;

  it('stays near the solo cost under preemption and returns to it after five solo prefills', async () => {
    // The pod's own per-token cost: 25 prefills of 16k tokens, each alone.
    const soloIndex = new MemoryKvIndex();
    const soloPod = newPod();
    const soloFeed = new CollectorFeed(soloIndex, 'm', 16, true);
    await soloFeed.register(soloPod, 0);
    let now = 0;
    for (let r = 0; r < 25; r++) {
      soloPod.engine.addRequest(
        { id: `s${r}`, promptTokenIds: prompt(16_000), maxTokens: 2, ignoreEos: true },
        now,
      );
      now = await drain(soloPod, soloFeed, now);
    }
    const soloCal = (await calibration(soloIndex))!;
    const solo = soloCal.prefillMsPerToken;
    // With it, the predictor's prefill (linear + attention term) is the engine's own prefill time.
    const sm = engineView(extractVllmMetrics(parsePromText(await soloPod.metrics!.render())), null)!;
    const measuredMs = (sm.prefillTimeSum! * 1000) / sm.prefillTimeCount!;
    const predictedMs = 16_000 * solo + (soloCal.attentionMsPerToken2 * 16_000 * 16_000) / 2;
    expect(Math.abs(predictedMs / measuredMs - 1)).toBeLessThan(0.02);

    const index = new MemoryKvIndex();
    const pod = newPod();
    const feed = new CollectorFeed(index, 'm', 16, true);
    await feed.register(pod, 0);
    // Overload: 40 requests of 16k at once, 300 tokens out each; two fit in the cache.
    for (let r = 0; r < 40; r++)
      pod.engine.addRequest(
        { id: `o${r}`, promptTokenIds: prompt(16_000), maxTokens: 300, ignoreEos: true },
        0,
      );
    now = await drain(pod, feed, 0);
    expect(pod.preemptions).toBeGreaterThan(5);
    // The plain mean (Σ prefill time / Σ computed tokens) is well above the solo cost.
    const m = engineView(extractVllmMetrics(parsePromText(await pod.metrics!.render())), null)!;
    expect((m.prefillTimeSum! * 1000) / m.computedTokensSum!).toBeGreaterThan(1.4 * solo);
    const loaded = (await calibration(index))!.prefillMsPerToken;
    expect(loaded).toBeLessThan(1.25 * solo);

    // Light traffic afterwards: five prefills that each run alone.
    for (let r = 0; r < 5; r++) {
      pod.engine.addRequest(
        { id: `l${r}`, promptTokenIds: prompt(16_000), maxTokens: 2, ignoreEos: true },
        now,
      );
      now = await drain(pod, feed, now);
    }
    expect((await calibration(index))!.prefillMsPerToken).toBeCloseTo(solo, 2);
  });
});
