// DecodeBook: this router's requests per pod still prefilling or decoding, for the ITL guard.
import type { PrefillWork } from '../core/itl-guard.js';
import type { PodId } from '../core/types.js';

/** Bounds memory if a pod is given requests faster than they leave (the oldest are dropped). */
const MAX_PER_POD = 4096;
/** Adds between sweeps of every pod's old work. */
const SWEEP_EVERY = 1024;

interface Flight {
  atMs: number;
  contextTokens: number;
  outputTokens: number;
}

/** One pod's account: its flights in the order they started, with running totals. */
interface PodAccount {
  work: PrefillWork[];
  flights: Map<number, Flight>;
  contextTokens: number;
  outputTokens: number;
}

export interface InFlight {
  count: number;
  contextTokens: number;
  outputTokens: number;
}

/**
 * What the ITL guard needs to know of this router's own requests per pod: the prefill work sent there within
 * the window (it stalled the pod's decodes whether or not its answer has ended since), and the context and
 * answer length of the requests still in flight (each decode step reads that context), which end when the log
 * phase reports the response, or after `maxFlightMs` if that never comes. Totals are kept as requests come
 * and go, so a lookup costs no more than dropping what has expired.
 */
export class DecodeBook {
  readonly #pods = new Map<PodId, PodAccount>();
  readonly #podOf = new Map<number, PodId>();
  #nextId = 1;

  constructor(
    readonly windowMs: number,
    readonly maxFlightMs: number,
  ) {}

  #account(podId: PodId): PodAccount {
    let a = this.#pods.get(podId);
    if (!a) this.#pods.set(podId, (a = { work: [], flights: new Map(), contextTokens: 0, outputTokens: 0 }));
    return a;
  }

  /** Records a request sent to a pod; returns the id `end` takes. */
  add(podId: PodId, atMs: number, stallMs: number, contextTokens: number, outputTokens: number): number {
    // Pods that left the fleet are never looked up again: sweep every pod now and then.
    if (this.#nextId % SWEEP_EVERY === 0) this.sweep(atMs);
    const a = this.#account(podId);
    a.work.push({ atMs, stallMs });
    if (a.work.length > MAX_PER_POD) a.work.splice(0, a.work.length - MAX_PER_POD);
    const id = this.#nextId++;
    a.flights.set(id, { atMs, contextTokens, outputTokens });
    a.contextTokens += contextTokens;
    a.outputTokens += outputTokens;
    this.#podOf.set(id, podId);
    if (a.flights.size > MAX_PER_POD) this.end(a.flights.keys().next().value!);
    return id;
  }

  /** The response has ended. Unknown ids are ignored. */
  end(id: number): void {
    const podId = this.#podOf.get(id);
    if (podId === undefined) return;
    this.#podOf.delete(id);
    const a = this.#pods.get(podId)!;
    const f = a.flights.get(id)!;
    a.flights.delete(id);
    a.contextTokens -= f.contextTokens;
    a.outputTokens -= f.outputTokens;
    this.#dropIfEmpty(podId, a);
  }

  #dropIfEmpty(podId: PodId, a: PodAccount): void {
    if (a.work.length === 0 && a.flights.size === 0) this.#pods.delete(podId);
  }

  /** The pod's prefill work still inside the window, oldest first (older entries are dropped). */
  recentWork(podId: PodId, nowMs: number): readonly PrefillWork[] {
    const a = this.#pods.get(podId);
    if (!a) return [];
    let i = 0;
    while (i < a.work.length && a.work[i]!.atMs <= nowMs - this.windowMs) i++;
    if (i > 0) a.work.splice(0, i);
    this.#dropIfEmpty(podId, a);
    return a.work;
  }

  /** Requests in flight on the pod, their summed context and output tokens (abandoned ones are dropped). */
  inFlight(podId: PodId, nowMs: number): InFlight {
    const a = this.#pods.get(podId);
    if (!a) return { count: 0, contextTokens: 0, outputTokens: 0 };
    // Flights are in start order: the abandoned ones are at the front.
    for (const [id, f] of a.flights) {
      if (f.atMs + this.maxFlightMs > nowMs) break;
      this.end(id);
    }
    return { count: a.flights.size, contextTokens: a.contextTokens, outputTokens: a.outputTokens };
  }

  /**
   * A scrape counted `onPod` requests on the pod (running and waiting, every gateway's): of this router's
   * flights that started before `startedBeforeMs` (some margin before the scrape, for a request still on its
   * way), no more than that many can still be there. The oldest of the rest ended without a log phase; they
   * stop counting now instead of after maxFlightMs.
   */
  trimToScrape(podId: PodId, startedBeforeMs: number, onPod: number): void {
    const a = this.#pods.get(podId);
    if (!a) return;
    let before = 0;
    for (const f of a.flights.values()) {
      if (f.atMs >= startedBeforeMs) break;
      before++;
    }
    let excess = before - onPod;
    for (const id of [...a.flights.keys()]) {
      if (excess-- <= 0) break;
      this.end(id);
    }
  }

  /** Requests in flight on record, every pod's (for stats). */
  get flights(): number {
    return this.#podOf.size;
  }

  /** Drops every pod's old work and abandoned flights, also of pods no request looks up any more. */
  sweep(nowMs: number): void {
    for (const pod of [...this.#pods.keys()]) {
      this.recentWork(pod, nowMs);
      this.inFlight(pod, nowMs);
    }
  }

  /** Pods with work or flights on record (for tests and debugging). */
  podsWithWork(): PodId[] {
    return [...this.#pods.keys()];
  }
}
