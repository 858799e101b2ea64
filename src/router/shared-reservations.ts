// Reservations shared with the other Kong nodes' routers through the index (`share_reservations`).
import { randomBytes } from 'node:crypto';
import type { PodId, Reservation } from '../core/types.js';
import type { ReservationStore, SharedClass, SharedReservation } from '../index/index.js';

/** Another node's reservation, with the class it was booked with (policies only). */
export type OtherReservation = Reservation & { cls?: SharedClass };

/**
 * The newest reservations read per request (about 50 bytes each). Older ones have mostly been prefilled
 * already, and only those since the pod's last scrape count as queued work.
 */
export const SHARED_RESERVATIONS_READ = 256;

/**
 * This router's reservations shared with the routers of the other Kong nodes through the index, and theirs
 * read back (`share_reservations`): each node then counts the work the others sent that the pods' metrics
 * do not show yet. Best effort: a failed share or read leaves a node with its own reservations only, as
 * without sharing, and never holds a request up (reads run beside the index lookup, under its deadline).
 */
export class SharedReservations {
  /** One per router: a reservation read back under this id is this router's own, already counted. */
  readonly router = randomBytes(6).toString('hex');
  /** Shared reservations by local id, until their response or their TTL (a response never seen). */
  readonly #shared = new Map<number, { model: string; r: SharedReservation }>();

  constructor(
    readonly index: ReservationStore,
    readonly ttlMs: number,
  ) {}

  /** Shares reservation `id` (ReservationBook.add's) made for `model`, with its class when it has one. */
  share(model: string, id: number, r: Reservation, cls?: SharedClass): void {
    const shared: SharedReservation = { router: this.router, id, ...r, ...(cls ? { cls } : {}) };
    for (const [k, v] of this.#shared) {
      if (v.r.atMs > r.atMs - this.ttlMs) break; // insertion order is time order
      this.#shared.delete(k);
    }
    this.#shared.set(id, { model, r: shared });
    quietly(() => this.index.shareReservation(model, shared, this.ttlMs));
  }

  /** Shared reservations held until their response or TTL. */
  get size(): number {
    return this.#shared.size;
  }

  /** Forgets the shared reservations past their TTL (Redis expires its copies by itself). */
  sweep(nowMs: number): void {
    for (const [k, v] of this.#shared) {
      if (v.r.atMs > nowMs - this.ttlMs) break; // insertion order is time order
      this.#shared.delete(k);
    }
  }

  /** Reservation `id` is over (its response was seen): the other nodes stop counting it. */
  end(id: number): void {
    const s = this.#shared.get(id);
    if (!s) return;
    this.#shared.delete(id);
    quietly(() => this.index.endReservation(s.model, s.r));
  }

  /** The other routers' live reservations for `model`, by pod; null when the index could not say. */
  async others(model: string, nowMs: number): Promise<Map<PodId, OtherReservation[]> | null> {
    let all: SharedReservation[];
    try {
      all = await this.index.sharedReservations(
        model,
        nowMs - this.ttlMs,
        SHARED_RESERVATIONS_READ,
        this.router,
      );
    } catch {
      return null;
    }
    const byPod = new Map<PodId, OtherReservation[]>();
    for (const s of all) {
      let list = byPod.get(s.podId);
      if (!list) byPod.set(s.podId, (list = []));
      list.push({
        podId: s.podId,
        atMs: s.atMs,
        uncachedTokens: s.uncachedTokens,
        promptTokens: s.promptTokens,
        ...(s.cls ? { cls: s.cls } : {}),
      });
    }
    return byPod;
  }
}

/** Runs a best-effort index write: neither its rejection nor a throw may reach the request. */
function quietly(write: () => Promise<void>): void {
  try {
    write().catch(() => undefined);
  } catch {
    // e.g. an index without sharing: this node goes on with its own reservations
  }
}
