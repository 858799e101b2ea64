// The ITL guard: whether a pod can take one more request without its decodes missing the ITL bound.
import type { DecodeSteps } from './types.js';

/**
 * The ITL guard: whether a pod can take one more request without the requests decoding there missing an
 * inter-token-latency bound, or running out of KV cache (vLLM then preempts and recomputes a request).
 *
 * A decode step reads the weights once and every running sequence's KV, so its time grows with the context
 * the pod decodes: d = d0 + k·Σcontext. vLLM schedules a prefill chunk in the same step as every running
 * decode, so while a pod prefills, each decoding request waits for the chunk: a response of n tokens whose
 * pod spends S of its decode time prefilling has ITL = d + S/n. Its decode lasts n·ITL, so at the bound b it
 * spans W = n·b, and the bound holds while the prefill stall within any such span stays under n·(b − d):
 *   ITL ≈ d · W / (W − S)          S: stall of the prefills sent to the pod within the last W
 * Under overload a choice by TTFT alone breaks the bound on every pod at once: it spreads cold prompts over
 * all of them (bench/results/seed.md, shared-prefix at concurrency 24).
 */

/** One request the router sent to a pod: when, and how long its prefill stalls the pod's decodes. */
export interface PrefillWork {
  atMs: number;
  stallMs: number;
}

export interface ItlModel {
  /** Decode step with no context: weights read, scheduling, sampling (ms). */
  decodeBaseMs: number;
  /** Added to a decode step per context token decoding on the pod (ms). */
  decodeMsPerContextToken: number;
  boundMs: number;
}

export interface ItlGuardInput {
  model: ItlModel;
  /** Prefill work sent to the pod, oldest first; entries before the span are ignored. */
  work: readonly PrefillWork[];
  /** Context tokens of the requests running on the pod (before this one). */
  runningContextTokens: number;
  /** Output tokens of a response decoding on the pod (the protected requests'). */
  responseTokens: number;
  /** KV cache the pod has left for this request's new blocks, in tokens; null when unknown. */
  kvFreeTokens: number | null;
  nowMs: number;
  /** The candidate request: its prompt (its context once it decodes), the tokens it must prefill, the
   * prefill time on this pod, and the engine steps that takes (each still gives every decode a token). */
  promptTokens: number;
  uncachedTokens: number;
  prefillMs: number;
  prefillSteps: number;
}

export interface ItlVerdict {
  /** Predicted ITL of the pod's decodes if it takes the request. */
  predictedItlMs: number;
  /** Within the bound and the KV cache, or the pod is idle (none may be closed to every request). */
  ok: boolean;
  /** Why not ok. */
  reason: 'itl' | 'kv' | null;
  /** When not ok: how long until the request would fit, as far as the stall already sent tells. */
  retryAfterMs: number;
  /** How long this request's prefill would stall the pod's decodes. */
  stallMs: number;
}

/**
 * The guard's decode model for a pod, from what the collector measured there (PodState.decodeSteps): the
 * line through its decode-only intervals; else the configured line scaled through the one step it measured
 * (weights and KV are both read at the GPU's memory bandwidth, so both terms scale alike); else the
 * configured line.
 */
export function measuredItlModel(configured: ItlModel, steps: DecodeSteps | null): ItlModel {
  if (steps === null || typeof steps !== 'object') return configured;
  // The record comes from Redis: anything but finite non-negative numbers leaves the configured line.
  const ok = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
  if (steps.line && ok(steps.line.baseMs) && ok(steps.line.msPerContextToken))
    return {
      ...configured,
      decodeBaseMs: steps.line.baseMs,
      decodeMsPerContextToken: steps.line.msPerContextToken,
    };
  if (!ok(steps.contextTokens) || !ok(steps.stepMs)) return configured;
  const prior = decodeStepMs(configured, steps.contextTokens);
  if (!(prior > 0 && steps.stepMs > 0)) return configured;
  const f = steps.stepMs / prior;
  return {
    ...configured,
    decodeBaseMs: configured.decodeBaseMs * f,
    decodeMsPerContextToken: configured.decodeMsPerContextToken * f,
  };
}

export function decodeStepMs(m: ItlModel, contextTokens: number): number {
  return m.decodeBaseMs + m.decodeMsPerContextToken * Math.max(0, contextTokens);
}

/** ITL of decodes taking `stepMs` per step when prefill stalls them `stallMs` within a span `spanMs`. */
export function itlWithStall(stepMs: number, spanMs: number, stallMs: number): number {
  const free = spanMs - stallMs;
  return free > 0 ? (stepMs * spanMs) / free : Number.POSITIVE_INFINITY;
}

export function itlVerdict(input: ItlGuardInput): ItlVerdict {
  const { model: m, nowMs } = input;
  const spanMs = Math.max(1, input.responseTokens) * m.boundMs;
  const work = input.work;
  // Oldest first: the span's work is a suffix of the list.
  let first = work.length;
  let inSpan = 0;
  while (first > 0 && work[first - 1]!.atMs > nowMs - spanMs) inSpan += work[--first]!.stallMs;
  const step = decodeStepMs(m, input.runningContextTokens + input.promptTokens);
  const stallMs = Math.max(0, input.prefillMs - input.prefillSteps * step);
  const itlAfter = (given: number): number => itlWithStall(step, spanMs, given + stallMs);
  const predictedItlMs = itlAfter(inSpan);
  const idle = inSpan <= 0 && input.runningContextTokens <= 0;
  const kvShort = input.kvFreeTokens !== null && input.uncachedTokens > input.kvFreeTokens;
  if (idle || (predictedItlMs <= m.boundMs && !kvShort))
    return { predictedItlMs, ok: true, reason: null, retryAfterMs: 0, stallMs };
  // Stall leaves the span oldest first; the request fits once enough has left. When the running context
  // alone (or the KV cache) is the limit, no amount does: retry after a span, when most answers have ended.
  let retryAfterMs = spanMs;
  if (!kvShort) {
    let left = inSpan;
    for (let i = first; i < work.length; i++) {
      const w = work[i]!;
      left -= w.stallMs;
      if (itlAfter(left) <= m.boundMs) {
        retryAfterMs = w.atMs + spanMs - nowMs;
        break;
      }
    }
  }
  return {
    predictedItlMs,
    ok: false,
    reason: kvShort ? 'kv' : 'itl',
    retryAfterMs: Math.max(0, retryAfterMs),
    stallMs,
  };
}
