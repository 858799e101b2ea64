// Passive pod health from the log phase: pods kept out with backoff after upstream failures.
import type { PodId } from '../core/types.js';

/** First time a pod is kept out after an upstream failure; doubled per further failed try, up to the cap. */
export const FIRST_BACKOFF_MS = 1000;
export const MAX_BACKOFF_MS = 30_000;
/** Entries of pods that have sat unused this long after their window are forgotten (fleet churn). */
const FORGET_AFTER_MS = 10 * 60_000;
const MAX_PODS = 10_000;

interface PodFailures {
  /** Failed tries in a row, counting only tries routed after the previous failure was known. */
  strikes: number;
  untilMs: number;
  /** Decisions made up to the last strike: a request routed by one of them was sent before we knew. */
  sinceSeq: number;
  detail: string;
}

export interface Skip {
  untilMs: number;
  strikes: number;
  detail: string;
}

export function backoffMs(strikes: number): number {
  return Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** Math.max(0, Math.min(strikes - 1, 30)));
}

/**
 * Passive health of the pods, from the log phase's view of each response (per plugin-server process).
 * `kong.service.set_target` bypasses Kong's own upstream health checks, and the collector notices a dead pod
 * only at its next scrapes; meanwhile a crashed pod refuses connections at once, its reservations are
 * released at once, and it looks like the idlest pod. A pod whose connection failed, or that answered a
 * gateway error, is kept out of the candidates for a bounded, growing time; the next success ends it.
 *
 * Requests routed before a failure was recorded (in flight when the pod died) extend the window but do not
 * grow it, and do not end it when they succeed: only what a later decision sent there says something new.
 */
export class UpstreamFailures {
  readonly #pods = new Map<PodId, PodFailures>();

  failed(podId: PodId, nowMs: number, routedSeq: number, currentSeq: number, detail: string): void {
    const r = this.#pods.get(podId);
    if (r && routedSeq <= r.sinceSeq) {
      r.untilMs = Math.max(r.untilMs, nowMs + backoffMs(r.strikes));
      return;
    }
    const strikes = (r?.strikes ?? 0) + 1;
    this.#pods.delete(podId);
    this.#pods.set(podId, { strikes, untilMs: nowMs + backoffMs(strikes), sinceSeq: currentSeq, detail });
    this.#prune(nowMs);
  }

  succeeded(podId: PodId, routedSeq: number): void {
    const r = this.#pods.get(podId);
    if (r && routedSeq > r.sinceSeq) this.#pods.delete(podId);
  }

  /** Why the pod is out now, or null when it may be chosen. */
  skip(podId: PodId, nowMs: number): Skip | null {
    const r = this.#pods.get(podId);
    return r && nowMs < r.untilMs ? { untilMs: r.untilMs, strikes: r.strikes, detail: r.detail } : null;
  }

  #prune(nowMs: number): void {
    // Map order is insertion order and a strike re-inserts: the oldest entries come first.
    for (const [id, r] of this.#pods) {
      if (this.#pods.size <= MAX_PODS && nowMs - r.untilMs < FORGET_AFTER_MS) break;
      this.#pods.delete(id);
    }
  }
}
