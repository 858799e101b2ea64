// The decision pool: worker threads preparing requests (template, tokenize, keys), deadlines, restarts.
import type { SegmentCacheStats } from '../segment-cache.js';
import { WorkerHandle } from './client.js';
import type { PrepareResult, PrepareSettings } from './protocol.js';

/** A call a worker has not answered this long after its budget is a hung worker: it is replaced. */
export const HANG_MS = 5_000;
/**
 * How long stats() (the debug state dump) waits for each worker's counts and heap, side by side. A worker
 * answers after the request it is preparing and a forced GC: 100 ms left a busy worker's heap out of most
 * of an hour's soak samples on a loaded host.
 */
const STATS_WAIT_MS = 2_000;
/** A slot whose worker died restarts it at most this often (a worker that cannot start does not spin). */
const RESTART_MIN_MS = 1_000;

/** Why the pool gave no prepared request: the event loop routes it on load alone with this reason. */
export interface PoolFailure {
  ok: false;
  reason: 'decision_budget_exceeded' | 'decision_worker_failed';
  detail: string;
}

/**
 * Bodies up to this size reach a worker through its slot's own shared buffer, reused: a fresh 600 KB copy
 * for each request cost the event loop 2-12 ms of allocation and page faults on a loaded host, the copy into
 * a buffer already mapped 0.02 ms. Larger bodies are copied once into a buffer that is transferred.
 */
const SHARED_BODY_MAX_BYTES = 16 * 1024 * 1024;
const SHARED_BODY_MIN_BYTES = 64 * 1024;

/** A body at least this long is a long job (about 32k tokens: tens of ms to tokenize when its prefix is new). */
export const LONG_BODY_BYTES = 128 * 1024;

interface Slot {
  index: number;
  handle: WorkerHandle | null;
  /** Config keys loaded in this slot's worker (true), loading (a promise) or failed to load (the error). */
  ready: Map<string, true | Promise<void> | Error>;
  /** The prepare call the worker runs (one at a time: waiting calls wait in the pool, not in a worker). */
  job: PrepareCall | null;
  /** The buffer the slot's bodies are copied into (grown to the largest body); read by its worker only. */
  shared: SharedArrayBuffer | null;
  prepared: number;
  long: number;
  restarts: number;
  lastStartMs: number;
}

/** A prepare call: waiting in the pool's queue until a worker it may use is idle, then in that worker. */
interface PrepareCall {
  key: string;
  settings: PrepareSettings;
  body: Uint8Array | string;
  affinity: number;
  long: boolean;
  done: (r: PrepareResult | PoolFailure) => void;
  settled: boolean;
  /** Runs when the budget ran out while a worker held the call (the hang watch). */
  onLate: (() => void) | null;
}

export interface PoolOptions {
  /** Bodies at least this long are long jobs: with 2+ workers they never hold every worker at once. */
  longBodyBytes?: number;
}

export interface PoolWorkerStats {
  worker: number;
  prepared: number;
  restarts: number;
  inFlight: number;
  /** Configs loaded in the worker (it prepares only their requests). */
  loaded: number;
  /** Long jobs (bodies of LONG_BODY_BYTES or more) this worker prepared. */
  long: number;
  segmentCaches: SegmentCacheStats[];
  /** The worker's own V8 heap in use, bytes (null: it did not answer within STATS_WAIT_MS). */
  heapUsedBytes: number | null;
}

/**
 * N worker threads, each holding its own tokenizer and template per config. A worker runs one request at a
 * time; the others wait in the pool, never in a worker's queue, and take the first worker they may use that
 * is idle. Affinity is a preference: a request goes to the worker its hash of model and first message picks
 * when that worker is idle (requests sharing a prefix find its caches warm), else to any idle one. Long jobs
 * (bodies of LONG_BODY_BYTES or more) never hold every worker at once: with 2+ workers one is always left to
 * short requests, so a small request never waits behind a fresh 100k-token context. The event loop waits for
 * an answer at most the config's decision budget (queue included; a call still queued then is never sent);
 * a worker that answers nothing for HANG_MS past it is terminated, and a worker that exits or fails is
 * replaced (its call answered decision_worker_failed). Calls wait for no load: a config no worker has loaded
 * yet gets null (the caller prepares the request itself, as without workers).
 */
export class DecisionPool {
  readonly size: number;
  readonly #slots: Slot[];
  readonly #settings = new Map<string, PrepareSettings>();
  readonly #queue: PrepareCall[] = [];
  readonly #longBodyBytes: number;
  #closed = false;

  constructor(size: number, options: PoolOptions = {}) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`pool size must be >= 1, got ${size}`);
    this.size = size;
    this.#longBodyBytes = options.longBodyBytes ?? LONG_BODY_BYTES;
    this.#slots = Array.from({ length: size }, (_, index) => ({
      index,
      handle: null,
      ready: new Map(),
      job: null,
      shared: null,
      prepared: 0,
      long: 0,
      restarts: 0,
      lastStartMs: 0,
    }));
    // The first worker failing to start throws here: the caller runs without a pool.
    for (const s of this.#slots) this.#start(s);
  }

  #start(slot: Slot): void {
    slot.lastStartMs = Date.now();
    slot.ready = new Map();
    slot.handle = new WorkerHandle((h) => this.#gone(slot, h));
    for (const [key, settings] of this.#settings) this.#warmSlot(slot, key, settings);
  }

  #gone(slot: Slot, h: WorkerHandle): void {
    if (slot.handle !== h) return;
    slot.handle = null;
    slot.ready = new Map();
    if (this.#closed) return;
    slot.restarts++;
    const wait = Math.max(0, slot.lastStartMs + RESTART_MIN_MS - Date.now());
    const restart = (): void => {
      if (this.#closed || slot.handle) return;
      try {
        this.#start(slot);
      } catch {
        setTimeout(restart, RESTART_MIN_MS).unref();
      }
    };
    setTimeout(restart, wait).unref();
  }

  #warmSlot(slot: Slot, key: string, settings: PrepareSettings): Promise<void> {
    const h = slot.handle;
    if (!h) return Promise.resolve();
    const load = h.send<null>({ op: 'warm', settings }).then(
      () => {
        if (slot.handle !== h) return;
        slot.ready.set(key, true);
        this.#drain();
      },
      (e: unknown) => {
        if (slot.handle === h) slot.ready.set(key, e instanceof Error ? e : new Error(String(e)));
      },
    );
    slot.ready.set(key, load);
    return load;
  }

  /**
   * Loads a config's tokenizer and template in every worker (at instance start), and in every worker started
   * later. Settles when every worker has loaded them or failed to.
   */
  warm(key: string, settings: PrepareSettings): Promise<void> {
    const known = this.#settings.get(key);
    this.#settings.set(key, settings);
    const loads: Promise<void>[] = [];
    for (const s of this.#slots) {
      const r = s.ready.get(key);
      if (known && r !== undefined && !(r instanceof Error)) {
        if (r !== true) loads.push(r);
        continue;
      }
      loads.push(this.#warmSlot(s, key, settings));
    }
    return Promise.all(loads).then(() => undefined);
  }

  /** True when some worker has loaded the config (its requests are prepared in the pool). */
  #servable(key: string): boolean {
    return this.#slots.some((s) => s.handle !== null && s.ready.get(key) === true);
  }

  /**
   * An idle worker the call may use now, or null (it waits): its affinity's worker if idle, else any idle
   * one; a long job only while another worker holds no long job (one is kept for short requests).
   */
  #pick(call: PrepareCall): Slot | null {
    if (call.long && this.size > 1) {
      const longs = this.#slots.filter((s) => s.job?.long).length;
      if (longs + 1 >= this.size) return null;
    }
    const idle = (s: Slot): boolean => s.handle !== null && s.job === null && s.ready.get(call.key) === true;
    const preferred = this.#slots[call.affinity % this.size]!;
    if (idle(preferred)) return preferred;
    return this.#slots.find(idle) ?? null;
  }

  /** Sends every waiting call a worker is free for, in arrival order (a short one passes a long one held back). */
  #drain(): void {
    for (let i = 0; i < this.#queue.length;) {
      const call = this.#queue[i]!;
      const slot = this.#pick(call);
      if (!slot) {
        i++;
        continue;
      }
      this.#queue.splice(i, 1);
      this.#run(slot, call);
    }
  }

  #run(slot: Slot, call: PrepareCall): void {
    const h = slot.handle!;
    slot.job = call;
    slot.prepared++;
    if (call.long) slot.long++;
    const [body, transfer] = this.#bodyFor(slot, call.body);
    const free = (): void => {
      if (slot.job !== call) return;
      slot.job = null;
      this.#drain();
    };
    let answered = false;
    const hung = (): void => {
      // Still nothing long after the budget: the worker is hung (an endless loop, a pathological regex).
      setTimeout(() => {
        if (!answered && slot.handle === h) void h.terminate();
      }, HANG_MS).unref();
    };
    call.onLate = hung;
    h.send<PrepareResult>({ op: 'prepare', settings: call.settings, body }, transfer).then(
      (r) => {
        answered = true;
        free();
        call.done(r);
      },
      (e: unknown) => {
        answered = true;
        free();
        call.done({
          ok: false,
          reason: 'decision_worker_failed',
          detail: `worker ${slot.index}: ${e instanceof Error ? e.message : String(e)}`.slice(0, 300),
        });
      },
    );
  }

  /**
   * The body as the worker gets it: in the slot's shared buffer (the worker is idle, so nobody reads it, and
   * the slot takes no other call before this one's answer), or a copy of its own, transferred.
   */
  #bodyFor(slot: Slot, body: Uint8Array | string): [Uint8Array | string, ArrayBuffer[]] {
    if (typeof body === 'string') return [body, []];
    const n = body.byteLength;
    if (n > SHARED_BODY_MAX_BYTES) {
      const own = new Uint8Array(body);
      return [own, [own.buffer]];
    }
    if (!slot.shared || slot.shared.byteLength < n)
      slot.shared = new SharedArrayBuffer(Math.max(SHARED_BODY_MIN_BYTES, 2 ** Math.ceil(Math.log2(n))));
    const view = new Uint8Array(slot.shared, 0, n);
    view.set(body);
    return [view, []];
  }

  /**
   * Prepares a request in a worker within `settings.budgetMs`, or null when no worker has loaded the config
   * yet. The caller's bytes are kept while the call waits (the router never changes them) and copied when a
   * worker takes it.
   */
  prepare(
    key: string,
    settings: PrepareSettings,
    body: Uint8Array | string,
    affinity: number,
  ): Promise<PrepareResult | PoolFailure> | null {
    if (!this.#servable(key)) return null;
    const bytes = typeof body === 'string' ? body.length : body.byteLength;
    return new Promise((resolve) => {
      const call: PrepareCall = {
        key,
        settings,
        body,
        affinity,
        long: bytes >= this.#longBodyBytes,
        settled: false,
        onLate: null,
        done: (r) => {
          if (call.settled) return;
          call.settled = true;
          clearTimeout(deadline);
          resolve(r);
        },
      };
      const deadline = setTimeout(() => {
        const queued = this.#queue.indexOf(call);
        if (queued >= 0) this.#queue.splice(queued, 1);
        call.done({
          ok: false,
          reason: 'decision_budget_exceeded',
          detail:
            queued >= 0
              ? `no decision worker free within decision_budget_ms ${settings.budgetMs}`
              : `a worker gave no answer within decision_budget_ms ${settings.budgetMs}`,
        });
        call.onLate?.();
      }, settings.budgetMs);
      deadline.unref();
      const slot = this.#pick(call);
      if (slot) this.#run(slot, call);
      else this.#queue.push(call);
    });
  }

  /** Per worker: requests prepared, restarts, calls in flight, its segment caches (hit rates) and its heap. */
  async stats(): Promise<PoolWorkerStats[]> {
    // A worker busy loading or preparing answers later: past STATS_WAIT_MS its figures are left out.
    const ask = <T>(s: Slot, op: 'stats' | 'heap', missing: T): Promise<T> =>
      s.handle
        ? Promise.race([
            s.handle.send<T>({ op }).catch(() => missing),
            new Promise<T>((r) => setTimeout(() => r(missing), STATS_WAIT_MS).unref()),
          ])
        : Promise.resolve(missing);
    return Promise.all(
      this.#slots.map(async (s) => {
        const [segmentCaches, heapUsedBytes] = await Promise.all([
          ask<SegmentCacheStats[]>(s, 'stats', []),
          ask<number | null>(s, 'heap', null),
        ]);
        return {
          worker: s.index,
          prepared: s.prepared,
          long: s.long,
          restarts: s.restarts,
          inFlight: s.handle?.inFlight ?? 0,
          loaded: [...s.ready.values()].filter((r) => r === true).length,
          segmentCaches,
          heapUsedBytes,
        };
      }),
    );
  }

  /** Terminates one worker as a crash would end it (fault tests and the debug hook): it is replaced. */
  async killWorker(index: number): Promise<void> {
    await this.#slots[index % this.size]?.handle?.terminate();
  }

  /** Calls waiting for a worker (none send while the pool has an idle worker they may use). */
  get queued(): number {
    return this.#queue.length;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const call of this.#queue.splice(0))
      call.done({ ok: false, reason: 'decision_worker_failed', detail: 'the decision pool closed' });
    await Promise.all(this.#slots.map((s) => s.handle?.terminate()));
  }
}
