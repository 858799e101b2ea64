// How long a pod failing its readiness probe stays followed before discovery drops it.
import type { PodSpec } from '../pods.js';

/**
 * How long a pod may fail its readiness probe and stay followed. Past the grace it is dropped from the
 * list, as if it had left; a ready pod, or one gone from the list, starts afresh. Grace 0: a pod that is not
 * ready is dropped at once.
 */
export class NotReadyGrace {
  readonly #since = new Map<string, number>();

  constructor(readonly graceMs: number) {}

  /** The pods to hand on at `nowMs`, and when a pod's grace ends next (null: none is counting). */
  apply(pods: readonly PodSpec[], nowMs: number): { pods: PodSpec[]; recheckAtMs: number | null } {
    const listed = new Set<string>();
    const kept: PodSpec[] = [];
    let recheckAtMs: number | null = null;
    for (const p of pods) {
      listed.add(p.id);
      if (p.ready !== false) {
        this.#since.delete(p.id);
        kept.push(p);
        continue;
      }
      const since = this.#since.get(p.id) ?? nowMs;
      this.#since.set(p.id, since);
      const endsAtMs = since + this.graceMs;
      if (endsAtMs <= nowMs) continue;
      kept.push(p);
      recheckAtMs = recheckAtMs === null ? endsAtMs : Math.min(recheckAtMs, endsAtMs);
    }
    for (const id of this.#since.keys()) if (!listed.has(id)) this.#since.delete(id);
    return { pods: kept, recheckAtMs };
  }
}
