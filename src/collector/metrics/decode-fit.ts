// Fits a pod's decode step against its batch's context (d = d0 + k·Σcontext) from scraped metrics.
import type { DecodeSteps } from '../../core/types.js';
import { median } from '../../util/median.js';
import { metricDelta as delta, type EngineMetrics } from './vllm-metrics.js';

/**
 * The decode step of a pod, d = d0 + k·Σcontext (core/itl-guard.ts), measured from /metrics.
 *
 * A scrape interval is decode-only when the same R requests decoded through it and nothing else ran: nothing
 * admitted (prefix_cache_queries still: vLLM counts them when a request is first scheduled), no prefill ended
 * (prompt_tokens still), the running gauge R at both ends, and every engine step with output gave exactly R
 * tokens (iteration_tokens: Σ = R × its count). A prefill chunk in flight shows there: the request it belongs
 * to is running but gives no token, so a step holding it gives R − 1. Such an interval's mean ITL
 * (inter_token_latency Σ / count) is the mean decode step at that batch's context.
 *
 * The context is not exposed per request. The KV cache the batch holds (kv_cache_usage × the cache) is it,
 * exactly, when its requests share nothing; a prefix they share is held once but read by each sequence. So
 * when R × (mean prompt + half the mean answer) of the requests that finished lately (request_prompt_tokens
 * and request_generation_tokens, recorded when a request ends) exceeds what is held by more than 25%, that
 * is taken instead.
 * Intervals at different batch sizes spread the context; a weighted least-squares line through them, once
 * outliers (steps something else slowed) are dropped, gives d0 and k. While they do not spread
 * enough for the slope to be sure, only the mean step at the mean context is known.
 */

export interface DecodeFitOptions {
  /** Intervals needed before anything is estimated. */
  minIntervals: number;
  /** Decode steps (with output) needed over those intervals. */
  minSteps: number;
  /** Intervals older than this are dropped: the fit describes the GPU and the model, which do not drift. */
  maxAgeMs: number;
  /** The slope is kept when it is this many standard errors above zero. */
  minSlopeZ: number;
}

export const DECODE_FIT_DEFAULTS: DecodeFitOptions = {
  minIntervals: 20,
  minSteps: 200,
  maxAgeMs: 30 * 60_000,
  minSlopeZ: 4,
};

/** Finished requests' mean context moves by this share of the gap per finished request (≈ the last 10). */
const CONTEXT_ALPHA = 0.1;
/** A batch whose estimated context exceeds the KV it holds by more than this shares prefixes. */
const SHARED_RATIO = 1.25;
/** Bounds the history kept (about 17 min of 1 s scrapes that are all decode-only). */
const MAX_INTERVALS = 1024;
/** Residuals beyond this many robust standard deviations (1.4826·MAD) are dropped before the final fit. */
const OUTLIER_SIGMAS = 4;

interface Interval {
  atMs: number;
  contextTokens: number;
  stepMs: number;
  steps: number;
}

interface Line {
  baseMs: number;
  msPerContextToken: number;
  /** Standard error of the slope; Infinity when the intervals do not spread. */
  slopeSe: number;
  xMean: number;
  yMean: number;
}

/** Weighted least squares of step time on context, each interval weighted by its steps. */
function fitLine(xs: readonly Interval[]): Line {
  let w = 0;
  let xm = 0;
  let ym = 0;
  for (const s of xs) {
    w += s.steps;
    xm += s.steps * s.contextTokens;
    ym += s.steps * s.stepMs;
  }
  xm /= w;
  ym /= w;
  let sxx = 0;
  let sxy = 0;
  for (const s of xs) {
    sxx += s.steps * (s.contextTokens - xm) ** 2;
    sxy += s.steps * (s.contextTokens - xm) * (s.stepMs - ym);
  }
  const slope = sxx > 0 ? sxy / sxx : 0;
  const base = ym - slope * xm;
  let rss = 0;
  for (const s of xs) rss += s.steps * (s.stepMs - base - slope * s.contextTokens) ** 2;
  // Residual variance per step, with the intervals (not the steps) as the degrees of freedom.
  const n = xs.length;
  const s2 = n > 2 ? ((rss / w) * n) / (n - 2) : Number.POSITIVE_INFINITY;
  const slopeSe = sxx > 0 ? Math.sqrt((s2 * w) / n / sxx) : Number.POSITIVE_INFINITY;
  return { baseMs: base, msPerContextToken: slope, slopeSe, xMean: xm, yMean: ym };
}

/**
 * The batch's context: the KV cache it holds when its requests share no prefix (then the cache counts each
 * token once, as the steps read it, and exactly), else R × the finished requests' mean.
 */
function batchContext(
  estimate: number,
  a: EngineMetrics,
  b: EngineMetrics,
  kvCapacity: number | null,
): number {
  if (kvCapacity === null || a.kvUsage === null || b.kvUsage === null) return estimate;
  const held = (kvCapacity * (a.kvUsage + b.kvUsage)) / 2;
  return estimate <= SHARED_RATIO * held ? held : estimate;
}

export class DecodeFit {
  #intervals: Interval[] = [];
  /** The last estimate, until an interval comes or goes (a fit sorts the residuals: not every scrape). */
  #cached: { estimate: DecodeSteps | null } | null = null;
  /** Mean context of a finished request (prompt + half its answer); null before one finished. */
  #requestContext: number | null = null;

  constructor(readonly opts: DecodeFitOptions = DECODE_FIT_DEFAULTS) {}

  /** Forgets everything (the server restarted). */
  reset(): void {
    this.#intervals = [];
    this.#cached = null;
    this.#requestContext = null;
  }

  /** One scrape interval, from the scrape at its start to the one at `atMs`. */
  add(atMs: number, a: EngineMetrics, b: EngineMetrics, kvCapacityTokens: number | null = null): void {
    this.#learnRequestContext(a, b);
    this.#addInterval(atMs, a, b, kvCapacityTokens);
    const from = atMs - this.opts.maxAgeMs;
    let drop = 0;
    while (drop < this.#intervals.length && this.#intervals[drop]!.atMs <= from) drop++;
    drop = Math.max(drop, this.#intervals.length - MAX_INTERVALS);
    if (drop > 0) {
      this.#intervals.splice(0, drop);
      this.#cached = null;
    }
  }

  #learnRequestContext(a: EngineMetrics, b: EngineMetrics): void {
    const n = delta(a, b, 'finishedPromptTokensCount');
    const prompt = delta(a, b, 'finishedPromptTokensSum');
    if (n === null || prompt === null || !(n > 0)) return;
    const gn = delta(a, b, 'finishedGenerationTokensCount');
    const gen = delta(a, b, 'finishedGenerationTokensSum');
    const answer = gn === n && gen !== null ? gen / n : 0;
    const mean = prompt / n + answer / 2;
    const prev = this.#requestContext;
    this.#requestContext = prev === null ? mean : prev + (1 - (1 - CONTEXT_ALPHA) ** n) * (mean - prev);
  }

  #addInterval(atMs: number, a: EngineMetrics, b: EngineMetrics, kvCapacity: number | null): void {
    const r = a.running;
    const ctx = this.#requestContext;
    if (r === null || !(r > 0) || b.running !== r || ctx === null) return;
    const still = [
      delta(a, b, 'prefixQueries'),
      delta(a, b, 'promptTokens'),
      delta(a, b, 'prefillTimeCount'),
    ];
    if (still.some((x) => x !== 0)) return; // also when a series is missing: nothing can be told
    const steps = delta(a, b, 'iterationTokensCount');
    const tokens = delta(a, b, 'iterationTokensSum');
    const itlN = delta(a, b, 'itlCount');
    const itlS = delta(a, b, 'itlSum');
    if (steps === null || tokens === null || itlN === null || itlS === null || !(steps > 0)) return;
    if (tokens !== r * steps || itlN !== tokens) return;
    this.#cached = null;
    this.#intervals.push({
      atMs,
      contextTokens: batchContext(r * ctx, a, b, kvCapacity),
      stepMs: (itlS * 1000) / itlN,
      steps,
    });
  }

  /** The pod's decode steps, or null until enough decode-only intervals were seen. */
  estimate(): DecodeSteps | null {
    this.#cached ??= { estimate: this.#fit() };
    return this.#cached.estimate;
  }

  #fit(): DecodeSteps | null {
    let xs = this.#intervals;
    const steps = xs.reduce((acc, s) => acc + s.steps, 0);
    if (xs.length < this.opts.minIntervals || steps < this.opts.minSteps) return null;
    let line = fitLine(xs);
    const res = xs.map((s) => s.stepMs - line.baseMs - line.msPerContextToken * s.contextTokens);
    const mid = median(res);
    const mad = median(res.map((r) => Math.abs(r - mid)));
    const cut = Math.max(OUTLIER_SIGMAS * 1.4826 * mad, 0.05 * line.yMean);
    const kept = xs.filter((_, i) => Math.abs(res[i]! - mid) <= cut);
    if (kept.length >= this.opts.minIntervals && kept.length < xs.length) {
      xs = kept;
      line = fitLine(xs);
    }
    const sure =
      line.msPerContextToken > 0 &&
      line.baseMs >= 0 &&
      line.msPerContextToken >= this.opts.minSlopeZ * line.slopeSe;
    return {
      contextTokens: line.xMean,
      stepMs: line.yMean,
      intervals: xs.length,
      line: sure ? { baseMs: line.baseMs, msPerContextToken: line.msPerContextToken } : null,
    };
  }
}
