// Estimates a pod's prefill cost per token and decode step from its /metrics counters, per scrape window.
import type { CollectorSection } from '../../config/collector-section.js';
import { DEFAULT_CALIBRATION } from '../../core/predictor.js';
import type { Calibration, DecodeSteps } from '../../core/types.js';
import { DecodeFit } from './decode-fit.js';
import { metricDelta as delta, type EngineMetrics } from './vllm-metrics.js';

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

/**
 * What set the prefill estimate: the median over solo prefills, the median over all prefills in the window,
 * or the window's totals (a vLLM without request_prefill_kv_computed_tokens).
 */
export type PrefillSource = 'solo' | 'median' | 'totals';

export interface Estimate {
  /** null until enough prefills were seen in the window. */
  calibration: Calibration | null;
  /** null while calibration is. */
  prefillSource: PrefillSource | null;
  /** Mean uncached prompt tokens per request in the window; null when no request finished prefill. */
  meanUncachedTokens: number | null;
  /** The decode step fitted over decode-only intervals (decode-fit.ts); null until it has enough. */
  decodeSteps: DecodeSteps | null;
}

const COUNTERS = [
  'prefixHits',
  'promptTokens',
  'prefillTimeSum',
  'prefillTimeCount',
  'computedTokensSum',
  'finishedPromptTokensSum',
  'finishedPromptTokensCount',
  'finishedGenerationTokensSum',
  'finishedGenerationTokensCount',
  'iterationTokensSum',
  'iterationTokensCount',
  'itlSum',
  'itlCount',
] as const;

/** One scrape interval's finished prefills (counter deltas). */
interface PrefillSample {
  atMs: number;
  requests: number;
  timeMs: number;
  tokens: number;
  /** The predictor's attention term for these prefills (0 when their prompt lengths are unknown). */
  attentionMs: number;
  /** Tokens came from request_prefill_kv_computed_tokens, recorded with the prefill time when a request
   * finishes, so this interval's time and tokens belong to the same requests. */
  paired: boolean;
  /** Nothing else ran or waited at either end of the interval: the prefill had the GPU to itself. */
  solo: boolean;
}

interface DecodeSample {
  atMs: number;
  steps: number;
  timeMs: number;
}

/** Bounds the history kept for a pod that prefills rarely (about 17 min of 1 s scrapes). */
const MAX_SAMPLES = 1024;
/** Solo prefills measure the GPU, not the load, so they outlive the window: up to this age. */
export const SOLO_MAX_AGE_MS = 30 * 60_000;

/** Median of the samples' ratios (attention term taken out), each weighted by its tokens. */
function tokenWeightedMedian(samples: readonly PrefillSample[]): number {
  const sorted = samples
    .filter((x) => x.tokens > 0 && x.requests > 0)
    .map((x) => ({ r: Math.max(0, x.timeMs - x.attentionMs) / x.tokens, w: x.tokens }))
    .sort((a, b) => a.r - b.r);
  const half = sorted.reduce((a, x) => a + x.w, 0) / 2;
  let acc = 0;
  for (const x of sorted) {
    acc += x.w;
    if (acc >= half) return x.r;
  }
  return sorted[sorted.length - 1]?.r ?? NaN;
}

const num = (v: number | null): number | null => (v === null || !Number.isFinite(v) ? null : v);

/**
 * Online per-pod calibration from cumulative vLLM counters (docs/architecture.md "The TTFT model"):
 *   prefillMsPerToken = request_prefill_time_seconds / computed prompt tokens, per finished request
 *   decodeStepMs      = Δ inter_token_latency_seconds_sum / Δ its count
 * The predictor adds queueing, decode interference and attention (attentionMsPerToken2 · U·(C+P)/2) itself,
 * so prefill wants the pod's own linear per-token cost: not its cost under load, and with the attention
 * term for the interval's prefills (from request_prompt_tokens, recorded with them) taken out. Prefill time
 * runs from first scheduled to first token: a preempted request's includes its recompute and its wait to be
 * re-admitted (4× a clean prefill under overload), and one that shares its steps with decodes runs slower.
 * So where vLLM exposes request_prefill_kv_computed_tokens (recorded with the prefill time when a request finishes), prefill is
 * the token-weighted median of the scrape intervals' ratios, which preempted outliers do not move, taken
 * over the intervals in which the pod ran nothing else when there are `minRequests / 4` such prefills.
 * Those solo prefills are kept beyond the window (the last `minRequests` of them, up to SOLO_MAX_AGE_MS),
 * so a long busy spell does not drift the estimate to the loaded cost.
 * Otherwise tokens are Δ prompt_tokens − Δ prefix_cache_hits, counted at scheduling, and only the
 * window's totals pair up, so prefill is their ratio.
 * The window is `windowMs`, stretched back to hold `minRequests` prefills when the pod is quiet: each new
 * prefill then moves the estimate, instead of an old value standing until the window fills again.
 * A counter going down (server restart) starts the history again; the last estimate stands meanwhile.
 */
export class CalibrationEstimator {
  #prev: EngineMetrics | null = null;
  #prefills: PrefillSample[] = [];
  /** The latest solo prefill samples, in or out of the window. */
  #solo: PrefillSample[] = [];
  #decodes: DecodeSample[] = [];
  readonly #decodeFit = new DecodeFit();
  #lastSteps: DecodeSteps | null = null;
  #last: Calibration | null = null;
  #lastSource: PrefillSource | null = null;

  /** Solo prefills needed before they alone set the estimate. */
  readonly #minSolo: number;

  constructor(readonly opts: CalibrationOptions) {
    this.#minSolo = Math.ceil(opts.minRequests / 4);
  }

  /** `kvCapacityTokens`: the engine's KV cache (cache_config_info), null when not exposed. */
  add(atMs: number, m: EngineMetrics, kvCapacityTokens: number | null = null): Estimate {
    const prev = this.#prev;
    this.#prev = m;
    if (prev && COUNTERS.some((k) => (delta(prev, m, k) ?? 0) < 0)) {
      this.#prefills = [];
      this.#solo = [];
      this.#decodes = [];
      this.#decodeFit.reset();
    } else if (prev) {
      this.#record(atMs, prev, m);
      this.#decodeFit.add(atMs, prev, m, kvCapacityTokens);
    }
    this.#trim(atMs);
    return this.estimate();
  }

  #record(atMs: number, a: EngineMetrics, b: EngineMetrics): void {
    const requests = delta(a, b, 'prefillTimeCount') ?? 0;
    const timeS = delta(a, b, 'prefillTimeSum') ?? 0;
    let tokens = num(delta(a, b, 'computedTokensSum'));
    const paired = tokens !== null;
    if (tokens === null) {
      const prompt = delta(a, b, 'promptTokens');
      tokens = prompt === null ? 0 : Math.max(0, prompt - (delta(a, b, 'prefixHits') ?? 0));
    }
    const solo = [a, b].every((x) => x.waiting === 0 && x.running !== null && x.running <= 1);
    const attentionMs = paired ? this.#attentionMs(a, b, requests, tokens) : 0;
    if (requests > 0 || tokens > 0) {
      const sample = { atMs, requests, timeMs: timeS * 1000, tokens, attentionMs, paired, solo };
      this.#prefills.push(sample);
      if (solo && paired && requests > 0) this.#solo.push(sample);
    }
    const steps = delta(a, b, 'itlCount') ?? 0;
    if (steps > 0) this.#decodes.push({ atMs, steps, timeMs: (delta(a, b, 'itlSum') ?? 0) * 1000 });
  }

  /**
   * The predictor's attention term for an interval's finished prefills: U·(C+P)/2 = U·(2P−U)/2 each, from
   * their mean prompt and mean uncached tokens (exact for the one prefill a solo interval mostly holds).
   */
  #attentionMs(a: EngineMetrics, b: EngineMetrics, requests: number, tokens: number): number {
    const promptSum = delta(a, b, 'finishedPromptTokensSum');
    const promptCount = delta(a, b, 'finishedPromptTokensCount');
    if (promptSum === null || promptCount === null || !(promptSum > 0 && promptCount > 0 && requests > 0))
      return 0;
    const P = promptSum / promptCount;
    const U = Math.min(P, tokens / requests);
    return (requests * this.opts.defaults.attentionMsPerToken2 * U * (2 * P - U)) / 2;
  }

  #trim(nowMs: number): void {
    const from = nowMs - this.opts.windowMs;
    // Older prefill samples go only while the newer ones still hold enough requests.
    let kept = this.#prefills.reduce((a, x) => a + x.requests, 0);
    while (this.#prefills.length > 0 && this.#prefills[0]!.atMs <= from) {
      const rest = kept - this.#prefills[0]!.requests;
      if (rest < this.opts.minRequests) break;
      kept = rest;
      this.#prefills.shift();
    }
    if (this.#prefills.length > MAX_SAMPLES) this.#prefills.splice(0, this.#prefills.length - MAX_SAMPLES);
    while (this.#decodes.length > 0 && this.#decodes[0]!.atMs <= from) this.#decodes.shift();
    // Solo samples: the newest ones holding minRequests prefills, none older than SOLO_MAX_AGE_MS.
    let solo = this.#solo.reduce((a, x) => a + x.requests, 0);
    while (this.#solo.length > 0) {
      const first = this.#solo[0]!;
      if (first.atMs > nowMs - SOLO_MAX_AGE_MS && solo - first.requests < this.opts.minRequests) break;
      solo -= first.requests;
      this.#solo.shift();
    }
  }

  estimate(): Estimate {
    const p = this.#prefills;
    const requests = p.reduce((a, x) => a + x.requests, 0);
    const tokens = p.reduce((a, x) => a + x.tokens, 0);
    const meanUncachedTokens = requests > 0 ? tokens / requests : null;

    let prefill: number | null = null;
    let source: PrefillSource = 'totals';
    if (requests >= this.opts.minRequests && tokens > 0) {
      const soloRequests = this.#solo.reduce((a, x) => a + x.requests, 0);
      if (soloRequests >= this.#minSolo) source = 'solo';
      else if (p.every((x) => x.paired)) source = 'median';
      const raw =
        source === 'totals'
          ? p.reduce((a, x) => a + x.timeMs, 0) / tokens
          : tokenWeightedMedian(source === 'solo' ? this.#solo : p);
      if (Number.isFinite(raw)) prefill = clamp(raw, PREFILL_MS_PER_TOKEN_RANGE);
    }

    const steps = this.#decodes.reduce((a, x) => a + x.steps, 0);
    let decode: number | null = null;
    if (steps >= this.opts.minDecodeSteps && steps > 0)
      decode = clamp(this.#decodes.reduce((a, x) => a + x.timeMs, 0) / steps, DECODE_STEP_MS_RANGE);

    if (prefill !== null) {
      this.#lastSource = source;
      this.#last = {
        ...this.opts.defaults,
        prefillMsPerToken: prefill,
        decodeStepMs: decode ?? this.#last?.decodeStepMs ?? this.opts.defaults.decodeStepMs,
      };
    } else if (decode !== null && this.#last !== null) this.#last = { ...this.#last, decodeStepMs: decode };
    this.#lastSteps = this.#decodeFit.estimate() ?? this.#lastSteps;
    return {
      calibration: this.#last,
      prefillSource: this.#lastSource,
      meanUncachedTokens,
      decodeSteps: this.#lastSteps,
    };
  }
}
