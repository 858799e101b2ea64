// The router's side of the ITL guard: what it sent to each pod, and the guard's verdict per candidate.
import { itlVerdict, measuredItlModel, type ItlModel, type ItlVerdict } from '../core/itl-guard.js';
import { DEFAULT_CALIBRATION, type Prediction } from '../core/predictor.js';
import type { PodLookup, Reservation } from '../core/types.js';
import { DecodeBook } from './decode-book.js';

/** A request whose log phase never came stops counting as decoding on its pod after this long. */
export const MAX_FLIGHT_MS = 600_000;
/** Own requests sent this long before a scrape are in its counts (one still on its way may not be). */
const SCRAPE_MARGIN_MS = 2_000;
/** Longest response the guard protects over (a longer answer's ITL is averaged over this many tokens). */
export const MAX_RESPONSE_TOKENS = 1024;

export interface ItlAdmissionConfig {
  itl_slo_ms: number;
  itl_response_tokens: number;
  itl_decode_base_ms: number;
  itl_decode_ms_per_1k_context: number;
  itl_decode_from_metrics: boolean;
}

export interface Candidate {
  pod: PodLookup;
  prediction: Prediction;
  /** This router's live reservations on the pod. */
  reservations: readonly Reservation[];
  promptTokens: number;
  /** The request's max_tokens, when it has one. */
  maxTokens: number | null;
  nowMs: number;
}

/**
 * The router's side of the ITL guard (core/itl-guard.ts): what it sent to each pod, and the verdict on each
 * candidate pod of a request. Marks a prediction `withinItl: false` with a reason when taking the request
 * would push the pod's decodes past the bound or its KV cache past full.
 */
export class ItlAdmission {
  readonly #model: ItlModel;
  readonly #book: DecodeBook;
  /** Each assessed prediction's verdict: its Retry-After and, once chosen, the stall it records. */
  readonly #verdicts = new WeakMap<Prediction, ItlVerdict>();

  constructor(readonly config: ItlAdmissionConfig) {
    this.#model = {
      decodeBaseMs: config.itl_decode_base_ms,
      decodeMsPerContextToken: config.itl_decode_ms_per_1k_context / 1000,
      boundMs: config.itl_slo_ms,
    };
    this.#book = new DecodeBook(MAX_RESPONSE_TOKENS * config.itl_slo_ms, MAX_FLIGHT_MS);
  }

  responseTokens(maxTokens: number | null): number {
    return Math.min(MAX_RESPONSE_TOKENS, maxTokens ?? this.config.itl_response_tokens);
  }

  assess(c: Candidate): void {
    const { pod, prediction: p, nowMs } = c;
    const s = pod.state;
    // A request whose log phase was lost would count for MAX_FLIGHT_MS: the pod's own counts bound it sooner.
    if (s.lastScrapeAtMs > 0)
      this.#book.trimToScrape(s.podId, s.lastScrapeAtMs - SCRAPE_MARGIN_MS, s.running + s.waiting);
    const own = this.#book.inFlight(s.podId, nowMs);
    const mine = this.responseTokens(c.maxTokens);
    // Requests the pod runs that this router did not send (other gateway nodes) count at our mean size.
    const others = Math.max(0, s.running - own.count);
    const meanContext = own.count > 0 ? own.contextTokens / own.count : c.promptTokens;
    const responseTokens = own.count > 0 ? own.outputTokens / own.count : mine;
    let kvFreeTokens: number | null = null;
    if (s.kvCapacityTokens > 0 && s.lastScrapeAtMs > 0) {
      let reserved = 0;
      for (const r of c.reservations) if (r.atMs >= s.lastScrapeAtMs) reserved += r.uncachedTokens;
      // What the last scrape left, less what we sent since, the rest of the running answers (half on
      // average) and this request's own answer.
      kvFreeTokens =
        s.kvCapacityTokens * (1 - s.kvUsage) - reserved - (s.running * responseTokens) / 2 - mine;
    }
    const cal = s.calibration ?? DEFAULT_CALIBRATION;
    const model = this.config.itl_decode_from_metrics
      ? measuredItlModel(this.#model, s.decodeSteps)
      : this.#model;
    const v = itlVerdict({
      model,
      work: this.#book.recentWork(s.podId, nowMs),
      runningContextTokens: own.contextTokens + others * meanContext,
      responseTokens,
      kvFreeTokens,
      nowMs,
      promptTokens: c.promptTokens,
      uncachedTokens: p.uncachedTokens,
      prefillMs: p.prefillMs,
      prefillSteps: Math.ceil(p.uncachedTokens / cal.maxBatchedTokens),
    });
    this.#verdicts.set(p, v);
    p.predictedItlMs = v.predictedItlMs;
    p.withinItl = v.ok;
    if (v.ok) return;
    p.reasons.push(
      v.reason === 'kv'
        ? `ITL guard: its KV cache cannot take ${p.uncachedTokens} more tokens without preempting`
        : `ITL guard: predicted ITL ${Number.isFinite(v.predictedItlMs) ? `${Math.round(v.predictedItlMs)} ms` : 'unbounded'} over the ${this.config.itl_slo_ms} ms bound (decode step model ${model === this.#model ? 'configured' : 'measured on the pod'})`,
    );
  }

  /** How long until the guard would let the assessed request onto the pod (for Retry-After). */
  retryAfterMs(p: Prediction): number {
    return this.#verdicts.get(p)?.retryAfterMs ?? 0;
  }

  /** The request was sent to the pod: returns the id `end` takes. */
  record(chosen: Prediction, nowMs: number, promptTokens: number, maxTokens: number | null): number {
    const stall = this.#verdicts.get(chosen)?.stallMs ?? chosen.prefillMs;
    return this.#book.add(chosen.podId, nowMs, stall, promptTokens, this.responseTokens(maxTokens));
  }

  end(id: number): void {
    this.#book.end(id);
  }

  /** Requests recorded in flight (until their log phase or MAX_FLIGHT_MS). */
  get flights(): number {
    return this.#book.flights;
  }

  sweep(nowMs: number): void {
    this.#book.sweep(nowMs);
  }
}
