import { describe, expect, it } from 'vitest';
import { DEFAULT_CALIBRATION } from '../../../src/core/predictor.js';
import { CalibrationEstimator, SOLO_MAX_AGE_MS } from '../../../src/collector/metrics/calibration.js';
import { parsePromText } from '../../../src/collector/metrics/prom-text.js';
import {
  engineView,
  extractVllmMetrics,
  type EngineMetrics,
} from '../../../src/collector/metrics/vllm-metrics.js';
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';

describe('vLLM /metrics', () => {
  it('parses labelled histograms without losing labels, _sum or _count', () => {
    const s = parsePromText(vllmExposition({ '0': { prefillN: 4, prefillS: 1.5 } }));
    expect(s).toContainEqual({
      name: 'vllm:request_prefill_time_seconds_sum',
      labels: { engine: '0', model_name: 'qwen' },
      value: 1.5,
    });
    expect(s).toContainEqual({
      name: 'vllm:request_prefill_time_seconds_count',
      labels: { engine: '0', model_name: 'qwen' },
      value: 4,
    });
  });

  it('extracts load, counters and cache config per engine, and sums a pod', () => {
    const text = vllmExposition(
      {
        '0': { running: 3, waiting: 2, kv: 0.5, prompt: 100 },
        '1': { running: 1, waiting: 0, kv: 0.25, prompt: 50 },
      },
      [
        '# TYPE vllm:cache_config_info gauge',
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",num_gpu_blocks="27000"} 1.0',
        'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="qwen"} 999',
        '# TYPE vllm:request_prompt_tokens histogram',
        'vllm:request_prompt_tokens_sum{engine="0",model_name="qwen"} 48000',
        'vllm:request_prompt_tokens_count{engine="0",model_name="qwen"} 3',
        'process_start_time_seconds 1.7e9',
      ].join('\n'),
    );
    const pod = extractVllmMetrics(parsePromText(text));
    expect(pod).toMatchObject({
      blockSize: 16,
      numGpuBlocks: 27000,
      prefixCaching: true,
      processStartTimeSec: 1.7e9,
    });
    expect(engineView(pod, 0)).toMatchObject({
      running: 3,
      waiting: 2,
      kvUsage: 0.5,
      promptTokens: 100,
      prefixQueries: 0,
      finishedPromptTokensSum: 48000,
      finishedPromptTokensCount: 3,
    });
    expect(engineView(pod, null)).toMatchObject({
      running: 4,
      waiting: 2,
      kvUsage: 0.375,
      promptTokens: 150,
    });
    expect(engineView(pod, 7)).toBeNull();
  });
});

describe('CalibrationEstimator', () => {
  const m = (p: Partial<EngineMetrics>): EngineMetrics => ({
    running: 0,
    waiting: 0,
    kvUsage: 0,
    prefixQueries: null,
    prefixHits: 0,
    promptTokens: 0,
    prefillTimeSum: 0,
    prefillTimeCount: 0,
    computedTokensSum: null,
    computedTokensCount: null,
    finishedPromptTokensSum: null,
    finishedPromptTokensCount: null,
    finishedGenerationTokensSum: null,
    finishedGenerationTokensCount: null,
    iterationTokensSum: null,
    iterationTokensCount: null,
    itlSum: 0,
    itlCount: 0,
    ...p,
  });
  const opts = { windowMs: 60_000, minRequests: 20, minDecodeSteps: 50, defaults: DEFAULT_CALIBRATION };

  it('estimates prefill ms/token from Δ prefill time / Δ uncached tokens, only after enough requests', () => {
    const e = new CalibrationEstimator(opts);
    e.add(0, m({}));
    const few = e.add(
      1000,
      m({ prefillTimeCount: 5, prefillTimeSum: 1, promptTokens: 5000, prefixHits: 1000 }),
    );
    expect(few.calibration).toBeNull();
    expect(few.meanUncachedTokens).toBe(800);
    const enough = e.add(
      2000,
      m({
        prefillTimeCount: 40,
        prefillTimeSum: 8,
        promptTokens: 44000,
        prefixHits: 4000,
        itlCount: 1000,
        itlSum: 30,
      }),
    );
    expect(enough.calibration).toEqual({ ...DEFAULT_CALIBRATION, prefillMsPerToken: 0.2, decodeStepMs: 30 });
    expect(enough.meanUncachedTokens).toBe(1000);
  });

  it('prefers request_prefill_kv_computed_tokens, clamps, keeps the last estimate when idle, resets on counter reset', () => {
    const e = new CalibrationEstimator(opts);
    e.add(0, m({ computedTokensSum: 0 }));
    const c = e.add(
      1000,
      m({ prefillTimeCount: 30, prefillTimeSum: 300, computedTokensSum: 10, promptTokens: 99999 }),
    );
    expect(c.calibration?.prefillMsPerToken).toBe(20); // 30 000 ms/token is clamped
    // Counters went down (restart): window restarts, last calibration kept.
    const r = e.add(2000, m({ prefillTimeCount: 1 }));
    expect(r.calibration?.prefillMsPerToken).toBe(20);
    expect(r.meanUncachedTokens).toBeNull();
  });

  /** Feeds one scrape per second; each step adds `d` to the counters and sets the gauges. */
  const feed = (e: CalibrationEstimator) => {
    let t = 0;
    const c = { prefillTimeCount: 0, prefillTimeSum: 0, computedTokensSum: 0, itlCount: 0, itlSum: 0 };
    e.add(t, m({ ...c }));
    return (d: { req: number; ms: number; tokens: number; running?: number; waiting?: number }) => {
      t += 1000;
      c.prefillTimeCount += d.req;
      c.prefillTimeSum += d.ms / 1000;
      c.computedTokensSum += d.tokens;
      return e.add(t, m({ ...c, running: d.running ?? 5, waiting: d.waiting ?? 0 }));
    };
  };

  it('takes the token-weighted median of per-interval ratios, so preempted prefills do not move it', () => {
    const step = feed(new CalibrationEstimator(opts));
    // 16 clean prefills at 0.4 ms/token and 4 preempted ones at 1.6 ms/token, on a loaded pod.
    for (let i = 0; i < 16; i++) step({ req: 1, ms: 4000, tokens: 10_000 });
    let est;
    for (let i = 0; i < 4; i++) est = step({ req: 1, ms: 16_000, tokens: 10_000 });
    // The window's mean would be 0.64 ms/token.
    expect(est!.calibration?.prefillMsPerToken).toBeCloseTo(0.4, 9);
    expect(est!.meanUncachedTokens).toBe(10_000);
  });

  it('prefers prefills that ran alone once there are minRequests / 4 of them', () => {
    const step = feed(new CalibrationEstimator(opts));
    for (let i = 0; i < 20; i++) step({ req: 1, ms: 6000, tokens: 10_000, running: 8 });
    const loaded = step({ req: 0, ms: 0, tokens: 0, running: 8 });
    expect(loaded.calibration?.prefillMsPerToken).toBeCloseTo(0.6, 9);
    expect(loaded.prefillSource).toBe('median');
    step({ req: 0, ms: 0, tokens: 0, running: 0 });
    let est;
    for (let i = 0; i < 4; i++) est = step({ req: 1, ms: 4000, tokens: 10_000, running: i % 2, waiting: 0 });
    expect(est!.calibration?.prefillMsPerToken).toBeCloseTo(0.6, 9);
    // One interval with a waiting request at its end is not solo; the fifth solo prefill switches.
    est = step({ req: 1, ms: 4000, tokens: 10_000, running: 1, waiting: 1 });
    expect(est.calibration?.prefillMsPerToken).toBeCloseTo(0.6, 9);
    step({ req: 0, ms: 0, tokens: 0, running: 0 });
    est = step({ req: 1, ms: 4000, tokens: 10_000, running: 1 });
    expect(est.calibration?.prefillMsPerToken).toBeCloseTo(0.4, 9);
    expect(est.prefillSource).toBe('solo');
  });

  it('keeps solo prefills beyond the window, so a long busy spell does not drift to the loaded cost', () => {
    const step = feed(new CalibrationEstimator(opts));
    for (let i = 0; i < 5; i++) step({ req: 1, ms: 4000, tokens: 10_000, running: 1 });
    // Twenty minutes of overload (20 windows): every prefill shares the GPU and takes 0.6 ms/token.
    let est;
    for (let i = 0; i < 1200; i++) est = step({ req: 1, ms: 6000, tokens: 10_000, running: 8 });
    expect(est!.prefillSource).toBe('solo');
    expect(est!.calibration?.prefillMsPerToken).toBeCloseTo(0.4, 9);
    // Past SOLO_MAX_AGE_MS with no solo prefill, the loaded median is all there is.
    for (let i = 0; i < (SOLO_MAX_AGE_MS - 1_200_000) / 1000; i++)
      est = step({ req: 1, ms: 6000, tokens: 10_000, running: 8 });
    expect(est!.prefillSource).toBe('median');
    expect(est!.calibration?.prefillMsPerToken).toBeCloseTo(0.6, 9);
  });

  it("takes the predictor's attention term out of each prefill, so the two agree at every length", () => {
    const e = new CalibrationEstimator(opts);
    const b = DEFAULT_CALIBRATION.attentionMsPerToken2;
    const c = {
      prefillTimeCount: 0,
      prefillTimeSum: 0,
      computedTokensSum: 0,
      computedTokensCount: 0,
      finishedPromptTokensSum: 0,
      finishedPromptTokensCount: 0,
    };
    e.add(0, m({ ...c }));
    let est;
    // Solo prefills of 2k to 32k prompts, 256 tokens of each cached, on a GPU that costs 0.25 ms/token
    // plus the predictor's own attention term.
    for (let i = 0; i < 20; i++) {
      const P = 2048 * (1 + (i % 16));
      const U = P - 256;
      const ms = 0.25 * U + (b * U * (256 + P)) / 2;
      c.prefillTimeCount++;
      c.prefillTimeSum += ms / 1000;
      c.computedTokensSum += U;
      c.computedTokensCount++;
      c.finishedPromptTokensSum += P;
      c.finishedPromptTokensCount++;
      est = e.add((i + 1) * 1000, m({ ...c, running: 1 }));
    }
    expect(est!.prefillSource).toBe('solo');
    expect(est!.calibration?.prefillMsPerToken).toBeCloseTo(0.25, 9);
  });

  it('stretches a sparse window back to minRequests prefills, so each new prefill moves the estimate', () => {
    const step = feed(new CalibrationEstimator(opts));
    for (let i = 0; i < 20; i++) step({ req: 1, ms: 6000, tokens: 10_000 });
    // Ten minutes with nothing, then one prefill a minute at 0.4 ms/token on a busy pod.
    for (let i = 0; i < 600; i++) step({ req: 0, ms: 0, tokens: 0 });
    const seen: number[] = [];
    for (let k = 0; k < 12; k++) {
      for (let i = 0; i < 59; i++) step({ req: 0, ms: 0, tokens: 0 });
      seen.push(step({ req: 1, ms: 4000, tokens: 10_000 }).calibration!.prefillMsPerToken);
    }
    // The median turns once the new prefills are half of the last 20 (0.6 until then).
    expect(seen.slice(0, 9).every((p) => Math.abs(p - 0.6) < 1e-9)).toBe(true);
    expect(seen[11]).toBeCloseTo(0.4, 9);
  });

  it('pairs only window totals when computed tokens are missing (prompt − hits are counted at scheduling)', () => {
    const e = new CalibrationEstimator(opts);
    e.add(0, m({}));
    // Time and tokens land in different intervals: 20 requests, 10 s over 20,000 uncached tokens in all.
    e.add(1000, m({ promptTokens: 25_000, prefixHits: 5000, running: 0 }));
    const est = e.add(
      2000,
      m({ prefillTimeCount: 20, prefillTimeSum: 10, promptTokens: 25_000, prefixHits: 5000, running: 0 }),
    );
    expect(est.calibration?.prefillMsPerToken).toBeCloseTo(0.5, 9);
    expect(est.prefillSource).toBe('totals');
  });
});
