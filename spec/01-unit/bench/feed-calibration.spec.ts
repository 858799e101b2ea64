import { describe, expect, it } from 'vitest';
import { engineProfile } from '../../../bench/lib/setup.js';
import { CollectorFeed } from '../../../bench/lib/des/feed.js';
import { SimPod } from '../../../bench/lib/des/pod.js';
import { MemoryKvIndex } from '../../../src/index/index.js';

// bench:live's discrete-event twin calibrates like the live collector: the pod's vLLM /metrics text goes
// through the collector's parser and CalibrationEstimator. With isolated prefills the estimate must be the
// engine's own prefill cost per token; without `calibrate` the router keeps the defaults (no calibration).
describe('discrete-event collector feed: calibration from the pod /metrics', () => {
  const run = async (calibrate: boolean) => {
    const profile = engineProfile('l40s-27b-fp8');
    const vocab = Array.from({ length: 500 }, (_, i) => 1000 + i);
    const pod = new SimPod(
      'pod-0',
      '10.0.0.1:8000',
      {
        profile,
        kvCapacityTokens: 94_208,
        blockSize: 16,
        eosTokenId: 2,
        outputVocab: vocab,
      },
      7,
    );
    const index = new MemoryKvIndex();
    const feed = new CollectorFeed(index, 'm', 16, calibrate);
    await feed.register(pod, 0);
    await feed.scrape(pod, 0);
    let now = 0;
    // 25 isolated requests of 2,000 unique tokens (> calibration_min_requests), each run to completion.
    for (let r = 0; r < 25; r++) {
      const ids = Array.from({ length: 2000 }, (_, i) => 3000 + ((r * 7919 + i * 31) % 60_000));
      pod.engine.addRequest({ id: `r${r}`, promptTokenIds: ids, maxTokens: 2, ignoreEos: true }, now);
      for (let t = pod.engine.nextEventTimeMs(); t !== null; t = pod.engine.nextEventTimeMs()) {
        for (const o of pod.engine.advanceTo(t)) if (o.kind === 'step') pod.noteStep(o);
        now = t;
      }
      now += 1000;
      await feed.scrape(pod, now);
    }
    return { pod, state: (await index.listPods('m')).find((p) => p.podId === 'pod-0')! };
  };

  it('writes the estimator’s per-pod prefill cost, close to the engine’s own', async () => {
    const { state } = await run(true);
    expect(state.calibration).not.toBeNull();
    // One 2,000-token step on this profile: 4 ms + 0.23 ms/token + 1.8e-5 × 2,000 × 1,000 attention = 500 ms.
    expect(state.calibration!.prefillMsPerToken).toBeGreaterThan(0.24);
    expect(state.calibration!.prefillMsPerToken).toBeLessThan(0.26);
    expect(state.meanQueuedPrefillTokens).toBeGreaterThan(1990);
    expect(state.meanQueuedPrefillTokens).toBeLessThan(2010);
  });

  it('leaves the calibration to the defaults when off', async () => {
    const { pod, state } = await run(false);
    expect(pod.metrics).toBeNull();
    expect(state.calibration).toBeNull();
  });
});
