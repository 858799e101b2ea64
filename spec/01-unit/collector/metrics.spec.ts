import { describe, expect, it } from 'vitest';
import { DEFAULT_CALIBRATION } from '../../../src/core/predictor.js';
import { CalibrationEstimator } from '../../../src/collector/metrics/calibration.js';
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
        'process_start_time_seconds 1.7e9',
      ].join('\n'),
    );
    const pod = extractVllmMetrics(parsePromText(text));
    expect(pod).toMatchObject({ blockSize: 16, numGpuBlocks: 27000, processStartTimeSec: 1.7e9 });
    expect(engineView(pod, 0)).toMatchObject({
      running: 3,
      waiting: 2,
      kvUsage: 0.5,
      promptTokens: 100,
      prefixQueries: 0,
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
});
