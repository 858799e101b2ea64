import type { PrefillWork } from '../core/itl-guard.js';
import type { PodId } from '../core/types.js';

/** Bounds memory if a pod is given requests faster than they leave (the oldest are dropped). */
const MAX_PER_POD = 4096;
/** Adds between sweeps of every pod's old work. */
const SWEEP_EVERY = 1024;

interface Flight {
  podId: PodId;
  atMs: number;
  contextTokens: number;
  outputTokens: number;
}

/**
 * What the ITL guard needs to know of this router's own requests per pod: the prefill work sent there within
 * the window (it stalled the pod's decodes whether or not its answer has ended since), and the context and
 * answer length of the requests still in flight (each decode step reads that context), which end when the log
 * phase reports the response,
 * or after `maxFlightMs` if that never comes.
 */
export class DecodeBook {
  readonly #work = new Map<PodId, PrefillWork[]>();
  readonly #flights = new Map<number, Flight>();
  readonly #byPod = new Map<PodId, Set<number>>();
  #nextId = 1;

  constructor(
    readonly windowMs: number,
    readonly maxFlightMs: number,
  ) {}

  /** Records a request sent to a pod; returns the id `end` takes. */
  add(podId: PodId, atMs: number, stallMs: number, contextTokens: number, outputTokens: number): number {
    // Pods that left the fleet are never looked up again: sweep every pod now and then.
    if (this.#nextId % SWEEP_EVERY === 0) {
      for (const pod of [...this.#work.keys()]) this.recentWork(pod, atMs);
      for (const pod of [...this.#byPod.keys()]) this.inFlight(pod, atMs);
    }
    let list = this.#work.get(podId);
    if (!list) this.#work.set(podId, (list = []));
    list.push({ atMs, stallMs });
    if (list.length > MAX_PER_POD) list.splice(0, list.length - MAX_PER_POD);
    const id = this.#nextId++;
    this.#flights.set(id, { podId, atMs, contextTokens, outputTokens });
    let ids = this.#byPod.get(podId);
    if (!ids) this.#byPod.set(podId, (ids = new Set()));
    ids.add(id);
    if (ids.size > MAX_PER_POD) this.end(ids.values().next().value!);
    return id;
  }

  /** The response has ended. Unknown ids are ignored. */
  end(id: number): void {
    const f = this.#flights.get(id);
    if (!f) return;
    this.#flights.delete(id);
    const ids = this.#byPod.get(f.podId);
    ids?.delete(id);
    if (ids?.size === 0) this.#byPod.delete(f.podId);
  }

  /** The pod's prefill work still inside the window, oldest first (older entries are dropped). */
  recentWork(podId: PodId, nowMs: number): readonly PrefillWork[] {
    const list = this.#work.get(podId);
    if (!list) return [];
    let i = 0;
    while (i < list.length && list[i]!.atMs <= nowMs - this.windowMs) i++;
    if (i > 0) list.splice(0, i);
    if (list.length === 0) this.#work.delete(podId);
    return list;
  }

  /** Pods with prefill work on record (for tests and debugging). */
  podsWithWork(): PodId[] {
    return [...this.#work.keys()];
  }

  /** Requests in flight on the pod, their summed context and output tokens (abandoned ones are dropped). */
  inFlight(podId: PodId, nowMs: number): { count: number; contextTokens: number; outputTokens: number } {
    const ids = this.#byPod.get(podId);
    let count = 0;
    let contextTokens = 0;
    let outputTokens = 0;
    if (!ids) return { count, contextTokens, outputTokens };
    for (const id of [...ids]) {
      const f = this.#flights.get(id)!;
      if (f.atMs + this.maxFlightMs <= nowMs) this.end(id);
      else {
        count++;
        contextTokens += f.contextTokens;
        outputTokens += f.outputTokens;
      }
    }
    return { count, contextTokens, outputTokens };
  }
}
