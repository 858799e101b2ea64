// Decisions kept in memory between the access and log phases, keyed by an id that reaches the log phase.
import type { SpanRef } from '../../src/telemetry/index.js';
import type { RouteOutcome } from '../../src/router/index.js';

/** A decision waiting for its log phase. */
export interface PendingDecision {
  outcome: RouteOutcome;
  /** The route span, when tracing is on (the log phase parents the TTFT span on it). */
  span: SpanRef | null;
  /** When access finished (epoch ms): the upstream request leaves right after. */
  accessEndMs: number;
  /**
   * Gives back what the router holds for the request (its reservation and ITL record), for a decision
   * dropped without its log phase.
   */
  release?: () => void;
}

/** Kong's longest plausible request: a pending decision older than this lost its log phase. */
export const PENDING_TTL_MS = 30 * 60_000;
export const PENDING_MAX_ENTRIES = 20_000;

export interface PendingStats {
  /** Decisions waiting for their log phase now. */
  size: number;
  /** Dropped since start because their log phase never came within the TTL. */
  expired: number;
  /** Dropped since start, oldest first, to stay within the entry bound. */
  evicted: number;
}

/**
 * Decisions kept in process memory between access and log, keyed by an id that reaches the log phase for
 * free: our span id inside the traceparent we send upstream (tracing on), else a ctx.shared value. Keeping the
 * whole outcome here (not in ctx.shared) avoids shipping every candidate over the RPC twice. Bounded: oldest
 * entries go first past the entry bound, and entries older than the TTL are dropped (a log phase that never
 * came: Kong skips it when a worker dies, or the plugin server restarted) on the next put or sweep. A dropped
 * decision is released (its reservation and ITL record end) and counted.
 */
export class PendingDecisions {
  readonly #max: number;
  readonly ttlMs: number;
  #map = new Map<string, PendingDecision>();
  #expired = 0;
  #evicted = 0;

  constructor(maxEntries = PENDING_MAX_ENTRIES, ttlMs = PENDING_TTL_MS) {
    this.#max = maxEntries;
    this.ttlMs = ttlMs;
  }

  get size(): number {
    return this.#map.size;
  }

  stats(): PendingStats {
    return { size: this.#map.size, expired: this.#expired, evicted: this.#evicted };
  }

  put(id: string, d: PendingDecision): void {
    this.#map.set(id, d);
    this.sweep(d.accessEndMs);
  }

  /** Drops the decisions past the TTL or the entry bound; returns how many. */
  sweep(nowMs: number): number {
    let dropped = 0;
    // Map iterates in insertion order: the first entries are the oldest.
    for (const [k, v] of this.#map) {
      const old = nowMs - v.accessEndMs > this.ttlMs;
      if (this.#map.size <= this.#max && !old) break;
      this.#map.delete(k);
      if (old) this.#expired++;
      else this.#evicted++;
      dropped++;
      try {
        v.release?.();
      } catch {
        // releasing is best effort: the router's own TTLs bound what it holds anyway
      }
    }
    return dropped;
  }

  take(id: string): PendingDecision | undefined {
    const d = this.#map.get(id);
    if (d) this.#map.delete(id);
    return d;
  }
}
