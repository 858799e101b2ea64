import type { PodId, Reservation } from '../core/types.js';

const MAX_PER_POD = 10_000;

/**
 * The router's own recent assignments per pod: work the pod's metrics do not show yet (they lag by a scrape
 * interval). A reservation ends when the log phase reports the first token, or after its TTL.
 */
export class ReservationBook {
  readonly #byPod = new Map<PodId, Reservation[]>();
  readonly #byId = new Map<number, Reservation>();
  readonly #ttlMs: number;
  #nextId = 1;

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** Returns an id for `release`, or null when reservations are off. */
  add(r: Reservation): number | null {
    if (this.#ttlMs <= 0) return null;
    let list = this.#byPod.get(r.podId);
    if (!list) this.#byPod.set(r.podId, (list = []));
    list.push(r);
    for (const dropped of list.length > MAX_PER_POD ? list.splice(0, list.length - MAX_PER_POD) : [])
      this.#forget(dropped);
    const id = this.#nextId++;
    this.#byId.set(id, r);
    return id;
  }

  #forget(r: Reservation): void {
    for (const [id, x] of this.#byId) if (x === r) this.#byId.delete(id);
  }

  /** Live reservations of a pod (expired ones are dropped on the way). */
  active(podId: PodId, nowMs: number): Reservation[] {
    const list = this.#byPod.get(podId);
    if (!list) return [];
    let i = 0;
    while (i < list.length && list[i]!.atMs + this.#ttlMs <= nowMs) i++;
    if (i > 0) for (const r of list.splice(0, i)) this.#forget(r);
    return list;
  }

  /** Drops one reservation (its first token has been seen). Unknown or expired ids are ignored. */
  release(id: number): void {
    const r = this.#byId.get(id);
    if (!r) return;
    this.#byId.delete(id);
    const list = this.#byPod.get(r.podId);
    const i = list ? list.indexOf(r) : -1;
    if (list && i >= 0) list.splice(i, 1);
  }
}
