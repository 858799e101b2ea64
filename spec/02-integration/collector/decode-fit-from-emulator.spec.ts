import { describe, expect, it } from 'vitest';
import { engineProfile } from '../../../bench/lib/setup.js';
import { CollectorFeed } from '../../../bench/lib/des/feed.js';
import { SimPod } from '../../../bench/lib/des/pod.js';
import { MemoryKvIndex } from '../../../src/index/index.js';

// The collector's decode fit against the emulated engine: its vLLM /metrics text, scraped every second of
// virtual time, goes through the collector's parser and CalibrationEstimator (bench/lib/des/feed.ts). Batches
// of 1 to 6 requests decode long answers, with prefills in between; the fit must find the profile's decode
// step, weights read + overhead and KV read per context token, which no setting told it.
describe('decode step measured from the emulator /metrics', () => {
  const measure = async (profileName: string, prompt: number, shared: number) => {
    const profile = engineProfile(profileName);
    const vocab = Array.from({ length: 500 }, (_, i) => 1000 + i);
    const pod = new SimPod(
      'pod-0',
      '10.0.0.1:8000',
      { profile, kvCapacityTokens: 94_208, blockSize: 16, eosTokenId: 2, outputVocab: vocab },
      7,
    );
    const index = new MemoryKvIndex();
    const feed = new CollectorFeed(index, 'm', 16, true);
    await feed.register(pod, 0);
    let now = 0;
    let nextScrape = 0;
    let n = 0;
    const run = async (): Promise<void> => {
      for (let t = pod.engine.nextEventTimeMs(); t !== null; t = pod.engine.nextEventTimeMs()) {
        for (; nextScrape <= t; nextScrape += 1000) await feed.scrape(pod, nextScrape);
        for (const o of pod.engine.advanceTo(t)) if (o.kind === 'step') pod.noteStep(o);
        now = t;
      }
    };
    for (let round = 0; round < 3; round++)
      for (const batch of [1, 4, 2, 6, 3, 5]) {
        for (let i = 0; i < batch; i++) {
          n++;
          // `shared` tokens every request has, then its own.
          const ids = Array.from({ length: prompt }, (_, j) =>
            j < shared ? 3000 + j : 3000 + ((n * 7919 + j * 31) % 60_000),
          );
          pod.engine.addRequest({ id: `r${n}`, promptTokenIds: ids, maxTokens: 150, ignoreEos: true }, now);
        }
        await run();
      }
    return (await index.listPods('m')).find((p) => p.podId === 'pod-0')!.decodeSteps!;
  };

  it('finds an L40S step of 43 ms + 0.36 ms per 1k context tokens, requests sharing nothing', async () => {
    const d = await measure('l40s-27b-fp8', 3000, 0);
    expect(d.intervals).toBeGreaterThan(50);
    expect(d.line!.baseMs).toBeGreaterThan(42.5);
    expect(d.line!.baseMs).toBeLessThan(43.5);
    expect(d.line!.msPerContextToken * 1000).toBeGreaterThan(0.35);
    expect(d.line!.msPerContextToken * 1000).toBeLessThan(0.37);
  });

  it('finds an H100 step of 13 ms + 0.1 ms per 1k, requests sharing a 12k-token prefix', async () => {
    const d = await measure('h100-27b-fp8', 12_500, 12_000);
    expect(d.line!.baseMs).toBeGreaterThan(12.8);
    expect(d.line!.baseMs).toBeLessThan(13.2);
    expect(d.line!.msPerContextToken * 1000).toBeGreaterThan(0.097);
    expect(d.line!.msPerContextToken * 1000).toBeLessThan(0.103);
  });
});
