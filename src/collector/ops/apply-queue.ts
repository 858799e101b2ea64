import type { IndexOp, KvIndex, PodRef } from '../../index/kv-index.js';
import { countOps, mergeOps } from './merge-ops.js';

interface RoomWaiter {
  below: number;
  resolve: () => void;
}

/** One decoded batch's ops, waiting to be written. */
export interface QueuedBatch {
  seq: number;
  /** Publisher timestamp (ms) — for event-to-index lag. */
  tsMs: number;
  ops: IndexOp[];
}

export interface ApplyQueueOptions {
  /** Bound on queued block ops; past it the queue is dropped and the pod resyncs. */
  maxQueuedOps: number;
  /** Ops per apply() call (batches are merged up to this). */
  maxOpsPerApply: number;
  retryMinMs: number;
  retryMaxMs: number;
}

export interface ApplyQueueHooks {
  applied(batches: readonly QueuedBatch[], appliedAtMs: number, applyMs: number, ops: number): void;
  failed(err: unknown, attempt: number): void;
  /** The bound was hit: the queue was dropped and writes are suspended until `probe` succeeds. */
  overflow(droppedOps: number, droppedBatches: number): void;
  recovered(): void;
  /** A cheap write that proves the index is reachable again. */
  probe(): Promise<void>;
}

/**
 * A pod's ordered write queue: one apply() in flight at a time, everything queued meanwhile merged into
 * the next call (so the batch size follows the index's latency), retries with backoff on failure, and a
 * hard bound: if the index stays unavailable, drop, suspend, and let the owner resync on recovery.
 */
export class ApplyQueue {
  #pending: QueuedBatch[] = [];
  #head = 0;
  #queuedOps = 0;
  #inFlight: QueuedBatch[] | null = null;
  #inFlightOps = 0;
  #inFlightDone: Promise<void> = Promise.resolve();
  #retry: QueuedBatch[] | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  #attempt = 0;
  #suspended = false;
  #closed = false;
  #waiters: (() => void)[] = [];
  #roomWaiters: RoomWaiter[] = [];
  lastAppliedSeq: number | null = null;

  constructor(
    readonly index: KvIndex,
    readonly pod: PodRef,
    readonly opts: ApplyQueueOptions,
    readonly hooks: ApplyQueueHooks,
  ) {}

  get queuedOps(): number {
    return this.#queuedOps;
  }

  get queuedBatches(): number {
    return this.#pending.length - this.#head + (this.#retry?.length ?? 0) + (this.#inFlight?.length ?? 0);
  }

  get suspended(): boolean {
    return this.#suspended;
  }

  /** Queues a batch; false when writes are suspended (the batch is dropped, the caller counts it). */
  push(batch: QueuedBatch): boolean {
    if (this.#suspended || this.#closed) return false;
    const n = countOps(batch.ops);
    if (this.#queuedOps + n > this.opts.maxQueuedOps && this.queuedBatches > 0) {
      this.#overflow(n);
      return false;
    }
    this.#pending.push(batch);
    this.#queuedOps += n;
    this.#pump();
    return true;
  }

  /** Resolves once everything queued so far is written (or dropped by suspension or close). */
  drained(): Promise<void> {
    if (this.#idle()) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Resolves once at most `below` ops are queued (or writes are suspended/closed): producer back-pressure. */
  waitForRoom(below: number): Promise<void> {
    if (this.#queuedOps <= below || this.#suspended || this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.#roomWaiters.push({ below, resolve }));
  }

  /** Drops what is queued; resolves once a write already sent has settled (nothing lands after that). */
  close(): Promise<void> {
    this.#closed = true;
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    this.#dropAll();
    this.#wake();
    return this.#inFlightDone;
  }

  #idle(): boolean {
    return (
      this.#suspended ||
      this.#closed ||
      (this.#inFlight === null && this.#retry === null && this.#head === this.#pending.length)
    );
  }

  #wake(): void {
    if (this.#roomWaiters.length > 0) {
      const all = this.#suspended || this.#closed;
      const keep: RoomWaiter[] = [];
      for (const w of this.#roomWaiters) {
        if (all || this.#queuedOps <= w.below) w.resolve();
        else keep.push(w);
      }
      this.#roomWaiters = keep;
    }
    if (!this.#idle()) return;
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  #take(): QueuedBatch[] {
    if (this.#retry !== null) {
      const r = this.#retry;
      this.#retry = null;
      return r;
    }
    const taken: QueuedBatch[] = [];
    let n = 0;
    while (this.#head < this.#pending.length) {
      const b = this.#pending[this.#head]!;
      const k = countOps(b.ops);
      if (taken.length > 0 && n + k > this.opts.maxOpsPerApply) break;
      taken.push(b);
      n += k;
      this.#head++;
    }
    if (this.#head === this.#pending.length) {
      this.#pending = [];
      this.#head = 0;
    } else if (this.#head > 4096 && this.#head * 2 > this.#pending.length) {
      this.#pending = this.#pending.slice(this.#head);
      this.#head = 0;
    }
    return taken;
  }

  #pump(): void {
    if (this.#inFlight !== null || this.#retryTimer !== null || this.#suspended || this.#closed) return;
    const taken = this.#take();
    if (taken.length === 0) return this.#wake();
    this.#inFlight = taken;
    const ops = mergeOps(taken.map((b) => b.ops));
    let n = 0;
    for (const b of taken) n += countOps(b.ops);
    this.#inFlightOps = n;
    const t0 = performance.now();
    this.#inFlightDone = this.index.apply(this.pod, ops).then(
      () => {
        this.#inFlight = null;
        if (this.#suspended || this.#closed) return this.#wake();
        this.#queuedOps -= n;
        this.#attempt = 0;
        this.lastAppliedSeq = taken[taken.length - 1]!.seq;
        this.hooks.applied(taken, Date.now(), performance.now() - t0, countOps(ops));
        this.#wake();
        this.#pump();
      },
      (err: unknown) => {
        this.#inFlight = null;
        if (this.#suspended || this.#closed) return this.#wake();
        this.#attempt++;
        this.hooks.failed(err, this.#attempt);
        this.#retry = taken;
        this.#retryTimer = setTimeout(() => {
          this.#retryTimer = null;
          this.#pump();
        }, this.#backoff());
      },
    );
  }

  #backoff(): number {
    return Math.min(this.opts.retryMaxMs, this.opts.retryMinMs * 2 ** Math.min(this.#attempt - 1, 16));
  }

  /** Drops everything not yet sent (a write in flight may still land: it is not counted as dropped). */
  #dropAll(): { ops: number; batches: number } {
    const batches = this.queuedBatches - (this.#inFlight?.length ?? 0);
    const ops = this.#queuedOps - (this.#inFlight ? this.#inFlightOps : 0);
    this.#pending = [];
    this.#head = 0;
    this.#retry = null;
    this.#queuedOps = 0;
    return { ops, batches };
  }

  #overflow(incomingOps: number): void {
    const dropped = this.#dropAll();
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    this.#suspended = true;
    this.hooks.overflow(dropped.ops + incomingOps, dropped.batches + 1);
    this.#wake();
    this.#probeLater();
  }

  #probeLater(): void {
    if (this.#closed) return;
    this.#attempt = Math.max(1, this.#attempt);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      if (this.#closed) return;
      // A write still in flight could land after the owner's recovery clear: wait for it to settle.
      if (this.#inFlight !== null) return this.#probeLater();
      this.hooks.probe().then(
        () => {
          if (this.#closed) return;
          this.#suspended = false;
          this.#attempt = 0;
          this.hooks.recovered();
          this.#pump();
        },
        (err: unknown) => {
          this.#attempt++;
          this.hooks.failed(err, this.#attempt);
          this.#probeLater();
        },
      );
    }, this.#backoff());
  }
}
