import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { choose } from '../../../src/core/choose.js';
import { cacheCreditFactor, predictTtft } from '../../../src/core/predictor.js';
import type { Calibration, PodLookup, PodState } from '../../../src/core/types.js';

const cal: Calibration = {
  overheadMs: 10,
  prefillMsPerToken: 0.5,
  attentionMsPerToken2: 0.001,
  cpuLoadMsPerToken: 0.01,
  decodeStepMs: 40,
  maxBatchedTokens: 2048,
};

function pod(over: Partial<PodState> = {}, gpu = 0, cpu = gpu): PodLookup {
  return {
    state: {
      podId: 'a',
      model: 'm',
      address: '10.0.0.1:8000',
      healthy: true,
      running: 0,
      waiting: 0,
      kvUsage: 0,
      kvCapacityTokens: 0,
      meanQueuedPrefillTokens: 0,
      maxModelLen: 0,
      calibration: cal,
      decodeSteps: null,
      lastEventAtMs: 1_000,
      lastScrapeAtMs: 1_000,
      resyncing: false,
      partialSinceMs: 0,
      ...over,
    },
    prefixBlocks: { GPU: gpu, CPU: cpu, STORAGE: cpu },
  };
}

const opts = { promptTokens: 1000, blockSize: 16, nowMs: 1_500, staleAfterMs: 1_000, reservations: [] };

describe('TTFT predictor (hand-computed)', () => {
  it('queue + prefill with attention + interference + overhead', () => {
    const p = predictTtft(pod({ running: 2, waiting: 1, meanQueuedPrefillTokens: 300 }, 50), {
      ...opts,
      reservations: [{ podId: 'a', atMs: 1_200, uncachedTokens: 100, promptTokens: 100 }],
    });
    // cached 800 of 1000 (cap 992); U = 200
    expect(p.cachedTokens).toBe(800);
    expect(p.uncachedTokens).toBe(200);
    expect(p.queuedTokens).toBe(400); // 1×300 waiting + 100 reserved after the last scrape
    expect(p.prefillMs).toBeCloseTo(100 + 0.001 * 200 * 900, 9); // 280
    expect(p.queueMs).toBeCloseTo(400 * 0.5 + 2 * 10, 9); // 220
    expect(p.interferenceMs).toBe(40); // ⌈600 / 2046⌉ steps × 40
    expect(p.predictedTtftMs).toBeCloseTo(550, 9);
  });

  it('reservations older than the last scrape are already in the metrics', () => {
    const p = predictTtft(pod({}, 0), {
      ...opts,
      reservations: [{ podId: 'a', atMs: 900, uncachedTokens: 1000, promptTokens: 1000 }],
    });
    // 600 ms at 0.5 ms/token: its prefill is done, and the metrics show no queue.
    expect(p.queuedTokens).toBe(0);
  });

  it('a reservation still prefilling counts even after the scrape (metrics show it as running)', () => {
    const p = predictTtft(pod({}, 0), {
      ...opts,
      reservations: [{ podId: 'a', atMs: 900, uncachedTokens: 5000, promptTokens: 5000 }],
    });
    expect(p.queuedTokens).toBe(5000 - 600 / 0.5);
  });

  it('CPU-tier blocks cost a load, not a prefill', () => {
    const p = predictTtft(pod({}, 10, 50), opts);
    expect(p.cachedTokens).toBe(160);
    expect(p.cpuTokens).toBe(640);
    expect(p.uncachedTokens).toBe(200);
    expect(p.loadMs).toBeCloseTo(6.4, 9);
  });

  it('the last prompt token is always recomputed (a fully cached prompt loses its last block)', () => {
    const p = predictTtft(pod({}, 64), { ...opts, promptTokens: 1024 });
    expect(p.cachedTokens).toBe(1008);
    expect(p.uncachedTokens).toBe(16);
  });

  it('discounts stale and resyncing pods', () => {
    expect(cacheCreditFactor(500, 1000, false)).toBe(1);
    expect(cacheCreditFactor(2000, 1000, false)).toBe(0.5);
    expect(cacheCreditFactor(5000, 1000, false)).toBe(0);
    expect(cacheCreditFactor(null, 1000, false)).toBe(0);
    expect(cacheCreditFactor(10, 1000, true)).toBe(0.5);
    const p = predictTtft(pod({ lastEventAtMs: 0, lastScrapeAtMs: 1_000 }, 50), { ...opts, nowMs: 3_000 });
    expect(p.cacheCredit).toBe(0.5);
    expect(p.cachedTokens).toBe(400);
  });

  it('applies the observed-latency correction factor', () => {
    const p = predictTtft(pod({}, 0), { ...opts, ttftFactor: 2 });
    expect(p.predictedTtftMs).toBeCloseTo(2 * p.modelTtftMs, 9);
  });

  it('more cached blocks never raise the prediction', () => {
    fc.assert(
      fc.property(
        fc.nat(100),
        fc.nat(100),
        fc.integer({ min: 1, max: 4000 }),
        fc.nat(20),
        fc.nat(20),
        (a, b, P, running, waiting) => {
          const lo = Math.min(a, b);
          const hi = Math.max(a, b);
          const o = { ...opts, promptTokens: P };
          const s = { running, waiting, meanQueuedPrefillTokens: 500 };
          expect(predictTtft(pod(s, hi), o).predictedTtftMs).toBeLessThanOrEqual(
            predictTtft(pod(s, lo), o).predictedTtftMs,
          );
        },
      ),
    );
  });
});

describe('choice', () => {
  const mk = (id: string, gpu: number, waiting = 0, healthy = true): PodLookup => {
    const p = pod({ podId: id, waiting, healthy, meanQueuedPrefillTokens: 1000 }, gpu);
    return p;
  };

  it('picks the lowest prediction and ranks all', () => {
    const preds = [mk('a', 0), mk('b', 60), mk('c', 30)].map((p) => predictTtft(p, opts));
    const d = choose(preds);
    expect(d.chosen?.podId).toBe('b');
    expect(d.candidates.map((c) => c.podId)).toEqual(['b', 'c', 'a']);
    expect(d.fallbackReason).toBeNull();
  });

  it('a busy pod loses its cache advantage', () => {
    const preds = [mk('a', 0), mk('b', 60, 5)].map((p) => predictTtft(p, opts));
    expect(choose(preds).chosen?.podId).toBe('a');
  });

  it('skips unhealthy pods, but still routes when all are unhealthy', () => {
    const d = choose([mk('a', 60, 0, false), mk('b', 0)].map((p) => predictTtft(p, opts)));
    expect(d.chosen?.podId).toBe('b');
    const all = choose([mk('a', 60, 0, false), mk('b', 0, 0, false)].map((p) => predictTtft(p, opts)));
    expect(all.chosen?.podId).toBe('a');
    expect(all.fallbackReason).toBe('all_pods_unhealthy');
    expect(choose([]).fallbackReason).toBe('no_pods_in_index');
  });

  it('flags stale_index only when every healthy pod has known-old data', () => {
    const old = { ...opts, nowMs: 1_000_000 };
    const stale = [mk('a', 10), mk('b', 0)].map((p) => predictTtft(p, old));
    expect(choose(stale).fallbackReason).toBe('stale_index');
    const unseen = predictTtft(pod({ podId: 'c', lastEventAtMs: 0, lastScrapeAtMs: 0 }, 0), old);
    expect(choose([unseen]).fallbackReason).toBeNull();
  });

  it('ignores candidate order (deterministic tie-breaks)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gpu: fc.nat(62), waiting: fc.nat(3), healthy: fc.boolean() }), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.nat(),
        (specs, shift) => {
          const preds = specs.map((s, i) => predictTtft(mk(`p${i}`, s.gpu, s.waiting, s.healthy), opts));
          const rotated = [
            ...preds.slice(shift % preds.length),
            ...preds.slice(0, shift % preds.length),
          ].reverse();
          expect(choose(rotated).candidates.map((c) => c.podId)).toEqual(
            choose(preds).candidates.map((c) => c.podId),
          );
        },
      ),
    );
  });
});
