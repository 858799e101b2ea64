// ReservationBook: this router's recent assignments per pod, the work its metrics do not show yet.
import type { BlockKey, PodId, Reservation } from '../core/types.js';

const MAX_PER_POD = 10_000;
/** Only the newest reservations of a pod keep their prompt's block keys (bounds memory and lookup time). */
export const MAX_KEYED_PER_POD = 256;
/**
 * Block keys all reservations keep together (~40 bytes each: ~10 MiB). A burst of long prompts kept up to
 * 256 × 8192 keys per pod (~80 MiB) before; past this, the oldest reservations' keys go first.
 */
export const MAX_KEYS_KEPT = 262_144;
/** A reservation keeps at most this prefix of its keys (credit is found on the prefix; the rest is rare). */
export const MAX_KEYS_PER_RESERVATION = MAX_KEYS_KEPT / 16;

/** The service class of a reserved request (policies only): what class admission protects (admit-class.ts). */
export interface ReservedClass {
  priority: number;
  objectiveMs: number;
  /** Its TTFT as predicted when booked, plus what requests placed after it were predicted to add to it. */
  expectedTtftMs: number;
}

/**
 * The router's own recent assignments per pod: work the pod's metrics do not show yet (they lag by a scrape
 * interval), and the prompts the pod is about to cache (the KV events of a prompt arrive only once the pod
 * has prefilled it, which under load is many seconds after the choice). A reservation ends when the log
 * phase reports the response, or after its TTL.
 */
export class ReservationBook {
  readonly #byPod = new Map<PodId, Reservation[]>();
  readonly #byId = new Map<number, Reservation>();
  readonly #idOf = new Map<Reservation, number>();
  readonly #keys = new Map<Reservation, readonly BlockKey[]>();
  readonly #classes = new Map<Reservation, ReservedClass>();
  readonly #ttlMs: number;
  #nextId = 1;
  /** Keys held in #keys, summed. */
  #keyCount = 0;

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /**
   * Returns an id for `release`, or null when reservations are off. `keys`: the prompt's block keys; `cls`:
   * its service class, when policies are configured.
   */
  add(r: Reservation, keys: readonly BlockKey[] = [], cls?: ReservedClass): number | null {
    if (this.#ttlMs <= 0) return null;
    if (cls) this.#classes.set(r, cls);
    let list = this.#byPod.get(r.podId);
    if (!list) this.#byPod.set(r.podId, (list = []));
    list.push(r);
    if (keys.length > 0) {
      const kept = keys.length > MAX_KEYS_PER_RESERVATION ? keys.slice(0, MAX_KEYS_PER_RESERVATION) : keys;
      this.#keys.set(r, kept);
      this.#keyCount += kept.length;
    }
    if (list.length > MAX_KEYED_PER_POD) this.#dropKeys(list[list.length - 1 - MAX_KEYED_PER_POD]!);
    // #keys iterates in insertion order: the oldest reservations' keys go first.
    for (const old of this.#keys.keys()) {
      if (this.#keyCount <= MAX_KEYS_KEPT) break;
      this.#dropKeys(old);
    }
    for (const dropped of list.length > MAX_PER_POD ? list.splice(0, list.length - MAX_PER_POD) : [])
      this.#forget(dropped);
    const id = this.#nextId++;
    this.#byId.set(id, r);
    this.#idOf.set(r, id);
    return id;
  }

  #dropKeys(r: Reservation): void {
    const k = this.#keys.get(r);
    if (k === undefined) return;
    this.#keys.delete(r);
    this.#keyCount -= k.length;
  }

  /** Block keys held (the memory the book's byte bound is about). */
  get keyCount(): number {
    return this.#keyCount;
  }

  /** The service class a reservation was booked with (mutable: later admissions add to its expected TTFT). */
  classOf(r: Reservation): ReservedClass | undefined {
    return this.#classes.get(r);
  }

  #forget(r: Reservation): void {
    this.#dropKeys(r);
    this.#classes.delete(r);
    const id = this.#idOf.get(r);
    if (id !== undefined) this.#byId.delete(id);
    this.#idOf.delete(r);
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

  /**
   * Longest prefix of `keys`, in blocks, that a live reservation of the pod shares: the pod will hold those
   * blocks once it has prefilled that request, which is before it reaches a request queued behind it.
   * Keys are chained (a key fixes every block before it), so the first mismatch ends a comparison.
   */
  pendingPrefixBlocks(podId: PodId, keys: readonly BlockKey[], nowMs: number): number {
    let best = 0;
    if (keys.length === 0) return 0;
    const list = this.active(podId, nowMs);
    // Only a pod's newest MAX_KEYED_PER_POD reservations keep keys (add drops them past it; release and
    // expiry only take entries out), so the rest of a busy pod's list, thousands long, is not walked.
    for (let j = Math.max(0, list.length - MAX_KEYED_PER_POD); j < list.length; j++) {
      const r = list[j]!;
      const k = this.#keys.get(r);
      if (!k) continue;
      const n = Math.min(k.length, keys.length);
      // Chained keys: a match at block i implies a match at every block before it, so a reservation can
      // beat the best so far only if it matches at best − 1, and the comparison resumes from there.
      if (n <= best || (best > 0 && k[best - 1] !== keys[best - 1])) continue;
      let i = best;
      while (i < n && k[i] === keys[i]) i++;
      best = i;
    }
    return best;
  }

  /** Reservations held (live or expired but not yet dropped). */
  get size(): number {
    return this.#byId.size;
  }

  /** Drops every pod's expired reservations, also of pods no request looks up any more. */
  sweep(nowMs: number): void {
    for (const [podId, list] of this.#byPod) {
      this.active(podId, nowMs);
      if (list.length === 0) this.#byPod.delete(podId);
    }
  }

  /** Drops one reservation (its response has been seen). Unknown or expired ids are ignored. */
  release(id: number): void {
    const r = this.#byId.get(id);
    if (!r) return;
    this.#byId.delete(id);
    this.#idOf.delete(r);
    this.#dropKeys(r);
    this.#classes.delete(r);
    const list = this.#byPod.get(r.podId);
    const i = list ? list.indexOf(r) : -1;
    if (list && i >= 0) list.splice(i, 1);
  }
}
