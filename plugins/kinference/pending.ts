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
}

/**
 * Decisions kept in process memory between access and log, keyed by an id that reaches the log phase for
 * free: our span id inside the traceparent we send upstream (tracing on), else a ctx.shared value. Keeping the
 * whole outcome here (not in ctx.shared) avoids shipping every candidate over the RPC twice. Bounded: oldest
 * entries go first, and entries older than the TTL are dropped (a log phase that never came: server restart).
 */
export class PendingDecisions {
  readonly #max: number;
  readonly #ttlMs: number;
  #map = new Map<string, PendingDecision>();

  constructor(maxEntries = 20_000, ttlMs = 30 * 60_000) {
    this.#max = maxEntries;
    this.#ttlMs = ttlMs;
  }

  get size(): number {
    return this.#map.size;
  }

  put(id: string, d: PendingDecision): void {
    this.#map.set(id, d);
    // Map iterates in insertion order: the first entries are the oldest.
    for (const [k, v] of this.#map) {
      if (this.#map.size <= this.#max && d.accessEndMs - v.accessEndMs <= this.#ttlMs) break;
      this.#map.delete(k);
    }
  }

  take(id: string): PendingDecision | undefined {
    const d = this.#map.get(id);
    if (d) this.#map.delete(id);
    return d;
  }
}
