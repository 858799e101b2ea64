import type { PodId, Reservation } from '../core/types.js';

const MAX_PER_POD = 10_000;

/**
 * The router's own recent assignments per pod: work the pod's metrics do not show yet (they lag by a scrape
 * interval). A reservation ends when the log phase reports the first token, or after its TTL.
 */
export class ReservationBook {
  readonly #byPod = new Map<PodId, Reservation[]>();
  readonly #ttlMs: number;

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  add(r: Reservation): void {
    if (this.#ttlMs <= 0) return;
    let list = this.#byPod.get(r.podId);
    if (!list) this.#byPod.set(r.podId, (list = []));
    list.push(r);
    if (list.length > MAX_PER_POD) list.splice(0, list.length - MAX_PER_POD);
  }

  /** Live reservations of a pod (expired ones are dropped on the way). */
  active(podId: PodId, nowMs: number): Reservation[] {
    const list = this.#byPod.get(podId);
    if (!list) return [];
    let i = 0;
    while (i < list.length && list[i]!.atMs + this.#ttlMs <= nowMs) i++;
    if (i > 0) list.splice(0, i);
    return list;
  }

  /** Drops one reservation (its first token has been seen). */
  release(r: Reservation): void {
    const list = this.#byPod.get(r.podId);
    if (!list) return;
    const i = list.indexOf(r);
    if (i >= 0) list.splice(i, 1);
  }

  /** Finds the reservation made at `atMs` on a pod (outcomes may cross a process boundary as plain data). */
  find(podId: PodId, atMs: number): Reservation | undefined {
    return this.#byPod.get(podId)?.find((r) => r.atMs === atMs);
  }
}
