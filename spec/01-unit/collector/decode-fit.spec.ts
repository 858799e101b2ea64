import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CalibrationEstimator, calibrationOptions } from '../../../src/collector/metrics/calibration.js';
import { DecodeFit } from '../../../src/collector/metrics/decode-fit.js';
import type { EngineMetrics } from '../../../src/collector/metrics/vllm-metrics.js';

/**
 * A pod's cumulative /metrics as vLLM keeps them, advanced one scrape interval at a time. Every request has
 * the same prompt and answer, so the finished requests' mean context (prompt + half the answer) is exact.
 */
class PodCounters {
  m: EngineMetrics = {
    running: 0,
    waiting: 0,
    kvUsage: 0,
    prefixQueries: 0,
    prefixHits: 0,
    promptTokens: 0,
    prefillTimeSum: 0,
    prefillTimeCount: 0,
    computedTokensSum: 0,
    computedTokensCount: 0,
    finishedPromptTokensSum: 0,
    finishedPromptTokensCount: 0,
    finishedGenerationTokensSum: 0,
    finishedGenerationTokensCount: 0,
    iterationTokensSum: 0,
    iterationTokensCount: 0,
    itlSum: 0,
    itlCount: 0,
  };
  constructor(
    readonly prompt = 4000,
    readonly answer = 200,
    readonly kvCapacity = 1_000_000,
  ) {}

  #add(k: keyof EngineMetrics, v: number): void {
    this.m[k] = (this.m[k] ?? 0) + v;
  }

  /** Requests finish: what the finished-request histograms record. */
  finish(n: number): EngineMetrics {
    this.#add('finishedPromptTokensSum', n * this.prompt);
    this.#add('finishedPromptTokensCount', n);
    this.#add('finishedGenerationTokensSum', n * this.answer);
    this.#add('finishedGenerationTokensCount', n);
    return { ...this.m };
  }

  /**
   * `steps` engine steps of `running` requests taking `stepMs` each; `prefilling` of them are in a prefill
   * chunk (running, no token); `admitted` requests were first scheduled in the interval.
   */
  interval(
    running: number,
    steps: number,
    stepMs: number,
    o: { prefilling?: number; admitted?: number; sharedPrefix?: number } = {},
  ): EngineMetrics {
    const decoding = running - (o.prefilling ?? 0);
    this.m.running = running;
    this.#add('prefixQueries', (o.admitted ?? 0) * this.prompt);
    this.#add('iterationTokensSum', decoding * steps);
    this.#add('iterationTokensCount', steps);
    this.#add('itlSum', (decoding * steps * stepMs) / 1000);
    this.#add('itlCount', decoding * steps);
    // The cache holds a shared prefix once and each request's own tokens.
    const shared = o.sharedPrefix ?? 0;
    this.m.kvUsage = (shared + running * (this.prompt - shared + this.answer / 2)) / this.kvCapacity;
    return { ...this.m };
  }
}

const ctx = (p: PodCounters): number => p.prompt + p.answer / 2;

/** Feeds scrape intervals of a pod to a DecodeFit, one scrape a second. */
class Feeder {
  readonly fit = new DecodeFit();
  prev: EngineMetrics;
  t = 0;
  constructor(readonly p = new PodCounters()) {
    this.prev = { ...p.m };
    p.finish(10); // recorded in the first interval
  }
  feed(next: EngineMetrics): void {
    this.fit.add((this.t += 1000), this.prev, next, this.p.kvCapacity);
    this.prev = next;
  }
  /** A decode-only interval of `r` requests at `stepMs`, after the interval that admitted the batch. */
  decode(r: number, stepMs: number, o: { sharedPrefix?: number } = {}): void {
    if (this.prev.running !== r) this.feed(this.p.interval(r, 1, 999, { admitted: 1, ...o }));
    this.feed(this.p.interval(r, 20, stepMs, o));
  }
}

/** Decode-only intervals at `batches` sizes, at the line's step time; the fit. */
function fitOver(batches: number[], base: number, perToken: number) {
  const f = new Feeder();
  for (const r of batches) f.decode(r, base + perToken * r * ctx(f.p));
  return f.fit.estimate();
}

describe('DecodeFit: the decode step from decode-only scrape intervals', () => {
  it('recovers d0 and k from intervals at different batch sizes', () => {
    const batches = Array.from({ length: 40 }, (_, i) => 1 + (i % 8));
    const est = fitOver(batches, 43, 0.00036);
    expect(est).not.toBeNull();
    expect(est!.intervals).toBe(40);
    expect(est!.line!.baseMs).toBeCloseTo(43, 6);
    expect(est!.line!.msPerContextToken).toBeCloseTo(0.00036, 9);
  });

  it('recovers any line exactly (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1, max: 200, noNaN: true }),
        fc.double({ min: 1e-5, max: 1e-2, noNaN: true }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 25, maxLength: 80 }),
        (base, k, batches) => {
          fc.pre(new Set(batches).size >= 3);
          const est = fitOver(batches, base, k);
          expect(est!.line).not.toBeNull();
          expect(Math.abs(est!.line!.baseMs - base)).toBeLessThan(1e-6 * base + 1e-6);
          expect(Math.abs(est!.line!.msPerContextToken / k - 1)).toBeLessThan(1e-6);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('gives only the mean step at the mean context while every interval has the same batch', () => {
    const est = fitOver(Array(30).fill(4), 43, 0.00036);
    expect(est!.line).toBeNull();
    expect(est!.intervals).toBe(30);
    expect(est!.contextTokens).toBeCloseTo(4 * 4100, 6);
    expect(est!.stepMs).toBeCloseTo(43 + 0.00036 * 4 * 4100, 6);
  });

  it('waits for enough intervals and steps', () => {
    expect(fitOver([1, 2, 3, 4, 5], 43, 0.00036)).toBeNull();
    expect(new DecodeFit().estimate()).toBeNull();
  });

  it('ignores intervals in which a prefill ran, a request came or left, or a series is missing', () => {
    const f = new Feeder();
    for (let i = 0; i < 30; i++) f.decode(1 + (i % 6), 43 + 0.00036 * (1 + (i % 6)) * ctx(f.p));
    const clean = f.fit.estimate()!;
    expect(clean.intervals).toBe(30);
    // Each of these would pull the line far off if it were taken: 900 ms steps.
    const p = f.p;
    expect(f.prev.running).toBe(6);
    f.feed(p.interval(6, 5, 900, { prefilling: 1 })); // a chunk in flight: 5 tokens a step from 6 running
    f.feed(p.interval(6, 5, 900, { admitted: 1 })); // a request first scheduled
    f.feed(p.interval(5, 5, 900)); // the batch changed between the scrapes
    f.feed({ ...p.interval(5, 5, 900), promptTokens: (f.prev.promptTokens ?? 0) + 4000 }); // a prefill ended
    f.feed({ ...p.interval(5, 5, 900), iterationTokensCount: null, iterationTokensSum: null }); // old vLLM
    expect(f.fit.estimate()).toEqual(clean);
  });

  it('drops an interval whose steps something else slowed', () => {
    const f = new Feeder();
    for (let i = 0; i < 40; i++) {
      const r = 1 + (i % 8);
      f.decode(r, 43 + (i === 17 ? 400 : 0) + 0.00036 * r * ctx(f.p));
    }
    const est = f.fit.estimate()!;
    expect(est.intervals).toBe(39);
    expect(est.line!.baseMs).toBeCloseTo(43, 6);
    expect(est.line!.msPerContextToken).toBeCloseTo(0.00036, 9);
  });

  it('counts a prefix the batch shares once per request, as each decode step reads it', () => {
    // 16k of each 16.5k prompt is shared: the cache holds it once, the steps read it R times.
    const f = new Feeder(new PodCounters(16_500, 256));
    for (let i = 0; i < 40; i++) {
      const r = 1 + (i % 8);
      f.decode(r, 43 + 0.00036 * r * ctx(f.p), { sharedPrefix: r > 1 ? 16_000 : 0 });
    }
    expect(f.fit.estimate()!.line!.msPerContextToken).toBeCloseTo(0.00036, 9);
  });

  it('takes the context from the KV cache when requests differ in length and share nothing', () => {
    // Finished requests average 4,100 tokens of context, but the batches decoding hold 8,100-token
    // requests: the KV cache tells; the finished requests' mean would put the slope at twice the truth.
    const f = new Feeder(new PodCounters(4000, 200));
    const long = new PodCounters(8000, 200);
    long.m = f.p.m;
    for (let i = 0; i < 40; i++) {
      const r = 1 + (i % 8);
      if (f.prev.running !== r) f.feed(long.interval(r, 1, 999, { admitted: 1 }));
      f.feed(long.interval(r, 20, 43 + 0.00036 * r * 8100));
    }
    expect(f.fit.estimate()!.line!.msPerContextToken).toBeCloseTo(0.00036, 9);
  });

  it('is estimated before any prefill is; after a restart the last stands until the new history has its own', () => {
    const est = new CalibrationEstimator(
      calibrationOptions({ calibration_window_ms: 120_000, calibration_min_requests: 20 }),
    );
    const p = new PodCounters();
    est.add(0, { ...p.m }, p.kvCapacity);
    p.finish(10);
    let last = est.add(1000, { ...p.m }, p.kvCapacity);
    expect(last.decodeSteps).toBeNull();
    let t = 1000;
    for (let i = 0; i < 30; i++) {
      const r = 1 + (i % 6);
      est.add((t += 1000), p.interval(r, 1, 999, { admitted: 1 }), p.kvCapacity);
      last = est.add((t += 1000), p.interval(r, 20, 43 + 0.00036 * r * ctx(p)), p.kvCapacity);
    }
    // No prefill finished in the window: no calibration, but the decode steps are known.
    expect(last.calibration).toBeNull();
    expect(last.decodeSteps!.line!.baseMs).toBeCloseTo(43, 6);
    // Counters start again from zero: the history goes, the last estimate stands meanwhile.
    const restarted = new PodCounters();
    const after = est.add((t += 1000), restarted.finish(1), p.kvCapacity);
    expect(after.decodeSteps!.intervals).toBe(30);
    expect(after.decodeSteps!.line!.baseMs).toBeCloseTo(43, 6);
    // The restarted server runs slower steps (other settings): only its own intervals count, once it has
    // finished requests to tell their context.
    restarted.finish(5);
    for (let i = 0; i < 30; i++) {
      const r = 1 + (i % 6);
      est.add((t += 1000), restarted.interval(r, 1, 999, { admitted: 1 }), p.kvCapacity);
      last = est.add((t += 1000), restarted.interval(r, 20, 60 + 0.00036 * r * ctx(p)), p.kvCapacity);
    }
    expect(last.decodeSteps!.intervals).toBe(30);
    expect(last.decodeSteps!.line!.baseMs).toBeCloseTo(60, 6);
  });
});
