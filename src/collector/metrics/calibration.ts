import type { CollectorSection } from '../../config/collector-section.js';
import { DEFAULT_CALIBRATION } from '../../core/predictor.js';
import type { Calibration } from '../../core/types.js';
import type { EngineMetrics } from './vllm-metrics.js';

export interface CalibrationOptions {
  /** Deltas are taken across this much scrape history. */
  windowMs: number;
  /** Prefills (requests) needed in the window before prefillMsPerToken is estimated. */
  minRequests: number;
  /** Decode steps (inter-token intervals) needed before decodeStepMs is estimated. */
  minDecodeSteps: number;
  /** Coefficients we cannot estimate from /metrics stay at these values. */
  defaults: Calibration;
}

/** The estimator's options for a collector's settings (its calibration window and minimum prefills). */
export function calibrationOptions(
  settings: Pick<CollectorSection, 'calibration_window_ms' | 'calibration_min_requests'>,
): CalibrationOptions {
  return {
    windowMs: settings.calibration_window_ms,
    minRequests: settings.calibration_min_requests,
    minDecodeSteps: 50,
    defaults: DEFAULT_CALIBRATION,
  };
}

/** Sane ranges: a coefficient outside them is a measurement artefact, not a GPU. */
export const PREFILL_MS_PER_TOKEN_RANGE = [0.001, 20] as const;
export const DECODE_STEP_MS_RANGE = [1, 2000] as const;

const clamp = (v: number, [lo, hi]: readonly [number, number]): number => Math.min(hi, Math.max(lo, v));

export interface Estimate {
  /** null until enough prefills were seen in the window. */
  calibration: Calibration | null;
  /** Mean uncached prompt tokens per request in the window; null when no request finished prefill. */
  meanUncachedTokens: number | null;
}

interface Point {
  atMs: number;
  m: EngineMetrics;
}

const COUNTERS = [
  'prefixHits',
  'promptTokens',
  'prefillTimeSum',
  'prefillTimeCount',
  'computedTokensSum',
  'itlSum',
  'itlCount',
] as const;

function delta(a: EngineMetrics, b: EngineMetrics, k: (typeof COUNTERS)[number]): number | null {
  const x = a[k];
  const y = b[k];
  return x === null || y === null ? null : y - x;
}

/**
 * Online per-pod calibration from cumulative vLLM counters over a sliding window (DESIGN.md "TTFT model"):
 *   prefillMsPerToken = Δ request_prefill_time_seconds_sum / Δ computed prompt tokens
 *   decodeStepMs      = Δ inter_token_latency_seconds_sum / Δ its count
 * Computed tokens are Δ request_prefill_kv_computed_tokens_sum when exposed, else Δ prompt_tokens − Δ
 * prefix_cache_hits. Prefill time includes queueing between chunks and the first sampling step, so the
 * estimate is an upper bound of the pure per-token cost — the quantity TTFT prediction needs.
 * A counter going down (server restart) resets the window.
 */
export class CalibrationEstimator {
  #points: Point[] = [];
  #last: Calibration | null = null;

  constructor(readonly opts: CalibrationOptions) {}

  add(atMs: number, m: EngineMetrics): Estimate {
    const prev = this.#points[this.#points.length - 1];
    if (prev && COUNTERS.some((k) => (delta(prev.m, m, k) ?? 0) < 0)) this.#points = [];
    this.#points.push({ atMs, m });
    while (this.#points.length > 2 && this.#points[1]!.atMs <= atMs - this.opts.windowMs)
      this.#points.shift();
    return this.estimate();
  }

  estimate(): Estimate {
    const a = this.#points[0];
    const b = this.#points[this.#points.length - 1];
    if (!a || !b || a === b) return { calibration: this.#last, meanUncachedTokens: null };

    const dReq = delta(a.m, b.m, 'prefillTimeCount');
    const dTimeS = delta(a.m, b.m, 'prefillTimeSum');
    let dTokens = delta(a.m, b.m, 'computedTokensSum');
    if (dTokens === null) {
      const prompt = delta(a.m, b.m, 'promptTokens');
      const hits = delta(a.m, b.m, 'prefixHits');
      dTokens = prompt === null ? null : Math.max(0, prompt - (hits ?? 0));
    }
    const meanUncachedTokens = dReq !== null && dReq > 0 && dTokens !== null ? dTokens / dReq : null;

    let prefill: number | null = null;
    if (dReq !== null && dReq >= this.opts.minRequests && dTimeS !== null && dTokens !== null && dTokens > 0)
      prefill = clamp((dTimeS * 1000) / dTokens, PREFILL_MS_PER_TOKEN_RANGE);

    const dSteps = delta(a.m, b.m, 'itlCount');
    const dItlS = delta(a.m, b.m, 'itlSum');
    let decode: number | null = null;
    if (dSteps !== null && dSteps >= this.opts.minDecodeSteps && dItlS !== null)
      decode = clamp((dItlS * 1000) / dSteps, DECODE_STEP_MS_RANGE);

    if (prefill !== null)
      this.#last = {
        ...this.opts.defaults,
        prefillMsPerToken: prefill,
        decodeStepMs: decode ?? this.#last?.decodeStepMs ?? this.opts.defaults.decodeStepMs,
      };
    else if (decode !== null && this.#last !== null) this.#last = { ...this.#last, decodeStepMs: decode };
    return { calibration: this.#last, meanUncachedTokens };
  }
}
