/**
 * Replay control for one stream (issue #36, replay storms): every resync that would ask the pod's replay
 * ROUTER goes through `request()`. At most one runs at a time (the stream's inbox already runs them one by
 * one); after a burst of REPLAY_BURST (a reconnection, a restart check and the new process's replay run back
 * to back) they start at least REPLAY_MIN_INTERVAL_MS apart (a token bucket), at most REPLAY_WINDOW_BUDGET
 * per REPLAY_WINDOW_MS; and a request that may not run now is held back as ONE pending resync that every later
 * request joins (coalesced). When its time comes it runs once, from the last batch applied: a replay always
 * reaches to the end of the engine's buffer, so one covers every range the held-back requests wanted.
 *
 * Why it is safe to hold a request back: the batch that raised it is in the engine's replay buffer if the
 * engine published it (the pending replay brings it back), and if it is not there it was never the engine's.
 * A few hundred frames that look like engine restarts or sequence jumps thus cost a replay a second, not a
 * full replay (or a clear) each.
 */

/** Replays of one stream start at least this far apart: a real restart or gap needs one, not one per frame. */
export const REPLAY_MIN_INTERVAL_MS = 1000;
/**
 * Replays that may run back to back before the interval applies: a restart seen while the connection replay
 * runs takes three (the connection's, the check, the new process's from 0), and must not wait for them.
 */
export const REPLAY_BURST = 3;
/** And at most this many per window: a pod that keeps asking (a flapping link, a forger) costs little. */
export const REPLAY_WINDOW_BUDGET = 20;
export const REPLAY_WINDOW_MS = 60_000;
/**
 * One replay reads at most this many batches: twice vLLM's default buffer_steps (10,000). A longer answer is
 * not a vLLM buffer as configured by default; a larger buffer_steps is read in several replays.
 */
export const REPLAY_MAX_BATCHES = 20_000;
/**
 * And at most this many payload bytes: what one replay may bring into memory before it stops and leaves the
 * rest to the next (held back like any other request). Batches are applied as they arrive, never gathered.
 */
export const REPLAY_MAX_BYTES = 256 * 1024 * 1024;

export interface ReplayLimits {
  minIntervalMs: number;
  burst: number;
  windowBudget: number;
  windowMs: number;
  maxBatches: number;
  maxBytes: number;
}

export const DEFAULT_REPLAY_LIMITS: ReplayLimits = {
  minIntervalMs: REPLAY_MIN_INTERVAL_MS,
  burst: REPLAY_BURST,
  windowBudget: REPLAY_WINDOW_BUDGET,
  windowMs: REPLAY_WINDOW_MS,
  maxBatches: REPLAY_MAX_BATCHES,
  maxBytes: REPLAY_MAX_BYTES,
};

/**
 * interval: too soon after the last replay; budget: the window's replays are spent. Both are held back as the
 * pending resync. bounded: a replay stopped at REPLAY_MAX_BATCHES / REPLAY_MAX_BYTES; cut_short: one stopped
 * early (a timeout) after it applied batches; unanswered: one timed out before any reply while a batch waited
 * on it. Each is requested again.
 */
export const REPLAY_REFUSAL_REASONS = ['interval', 'budget', 'bounded', 'cut_short', 'unanswered'] as const;
export type ReplayRefusalReason = (typeof REPLAY_REFUSAL_REASONS)[number];

export interface ReplayControlStats {
  requested: number;
  coalesced: number;
  refused: Record<ReplayRefusalReason, number>;
}

export function newReplayControlStats(): ReplayControlStats {
  return {
    requested: 0,
    coalesced: 0,
    refused: { interval: 0, budget: 0, bounded: 0, cut_short: 0, unanswered: 0 },
  };
}

export type ReplayDecision = 'run' | 'coalesced' | 'interval' | 'budget';

/**
 * `merge` folds a new request's kind into the pending one (the stronger wins); `fire` runs the pending
 * resync when its time has come (it queues it on the stream's inbox).
 */
export class ReplayControl<K> {
  #starts: number[] = [];
  /** Token bucket: one token per replay, refilled at one per minIntervalMs, up to burst. */
  #tokens: number;
  #refilledAtMs: number | null = null;
  #pending: K | null = null;
  #timer: NodeJS.Timeout | null = null;

  constructor(
    readonly stats: ReplayControlStats,
    readonly fire: (kind: K) => void,
    readonly merge: (pending: K, next: K) => K,
    readonly limits: ReplayLimits = DEFAULT_REPLAY_LIMITS,
    /** The clock a held-back request is checked against when its timer fires (the stream's). */
    readonly now: () => number = Date.now,
  ) {
    this.#tokens = limits.burst;
  }

  get pending(): K | null {
    return this.#pending;
  }

  /** One resync that would replay: run it now, or hold it back (then the caller drops its trigger). */
  request(kind: K, nowMs: number): ReplayDecision {
    this.stats.requested++;
    if (this.#pending !== null) {
      this.#pending = this.merge(this.#pending, kind);
      this.stats.coalesced++;
      return 'coalesced';
    }
    const at = this.#allowedAt(nowMs);
    if (at.ms <= nowMs) {
      this.#started(nowMs);
      return 'run';
    }
    this.stats.refused[at.reason]++;
    this.#pending = kind;
    this.#timer = setTimeout(() => this.#firePending(), at.ms - nowMs);
    this.#timer.unref();
    return at.reason;
  }

  /**
   * A replay stopped at its bounds, cut short or unanswered: its rest is one more request, held back like any
   * other, and not before `delayMs` from now.
   */
  bounded(
    kind: K,
    nowMs: number,
    reason: 'bounded' | 'cut_short' | 'unanswered' = 'bounded',
    delayMs = 0,
  ): void {
    this.stats.refused[reason]++;
    if (this.#pending !== null) {
      this.#pending = this.merge(this.#pending, kind);
      return;
    }
    // Always through the timer (at once if allowed): the caller is the replay that just stopped.
    this.#pending = kind;
    this.#timer = setTimeout(() => this.#firePending(), Math.max(delayMs, this.#allowedAt(nowMs).ms - nowMs));
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#pending = null;
  }

  #firePending(): void {
    this.#timer = null;
    const kind = this.#pending;
    if (kind === null) return;
    const now = this.now();
    const at = this.#allowedAt(now);
    if (at.ms > now) {
      this.#timer = setTimeout(() => this.#firePending(), at.ms - now);
      this.#timer.unref();
      return;
    }
    this.#pending = null;
    this.#started(now);
    this.fire(kind);
  }

  #started(nowMs: number): void {
    this.#starts.push(nowMs);
    this.#tokens -= 1;
  }

  #allowedAt(nowMs: number): { ms: number; reason: 'interval' | 'budget' } {
    const { minIntervalMs, burst, windowBudget, windowMs } = this.limits;
    const since = this.#refilledAtMs === null ? 0 : Math.max(0, nowMs - this.#refilledAtMs);
    this.#tokens = Math.min(burst, this.#tokens + since / minIntervalMs);
    this.#refilledAtMs = nowMs;
    while (this.#starts.length > 0 && this.#starts[0]! <= nowMs - windowMs) this.#starts.shift();
    if (this.#starts.length >= windowBudget)
      return { ms: this.#starts[this.#starts.length - windowBudget]! + windowMs, reason: 'budget' };
    if (this.#tokens >= 1) return { ms: nowMs, reason: 'interval' };
    return { ms: nowMs + Math.ceil((1 - this.#tokens) * minIntervalMs), reason: 'interval' };
  }
}
