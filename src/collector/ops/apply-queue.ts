// A pod's ordered write queue to the index: one apply() in flight, later batches merged, retries.
import {
  LeaseLostError,
  nextApplyId,
  type ApplyId,
  type IndexLossReason,
  type IndexOp,
  type IndexWriter,
  type PodRef,
} from '../../index/index.js';
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
  /**
   * The index lost writes it had confirmed for this pod (Redis restarted empty or from an older snapshot,
   * or was flushed): the queue was dropped and writes are suspended until `probe` succeeds, then
   * `recovered` asks the owner to clear and rebuild the pod, as after an overflow.
   */
  lost?(reason: IndexLossReason, droppedOps: number, droppedBatches: number): void;
  recovered(): void;
  /** A cheap write that proves the index is reachable again. */
  probe(): Promise<void>;
  /**
   * The index refused a write or the probe (KINF_ERR_LEASE_LOST): another process holds the model's
   * writer lease. Not transient, so never retried: the queue was dropped and stays suspended, without
   * probing; the owner must stop writing altogether.
   */
  leaseLost?(err: LeaseLostError): void;
}

/** One apply() call: its batches, merged ops and identity (a retry resends exactly this). */
interface Write {
  batches: QueuedBatch[];
  ops: IndexOp[];
  /** Block ops of the batches (what the queue counted). */
  n: number;
  id: ApplyId;
}

/**
 * A pod's ordered write queue: one apply() in flight at a time, everything queued meanwhile merged into
 * the next call (so the batch size follows the index's latency), retries with backoff on failure, and a
 * hard bound: if the index stays unavailable, drop, suspend, and let the owner resync on recovery.
 *
 * Exactly once: each apply carries an ApplyId, and a retry resends the same ops under the same id, so a
 * write that ran although its answer was lost (timeout, dropped connection) is not counted twice; the
 * index skips it. A new apply (after a success, or after the queue was dropped) gets a new id.
 * When the index reports that it lost this pod's writes (IndexWriter.onWritesLost), the queue does what it
 * does on overflow: drop, suspend, probe, and let the owner clear and rebuild. A write the index refuses
 * because another process holds the writer lease is not retried at all (hooks.leaseLost).
 */
export class ApplyQueue {
  #pending: QueuedBatch[] = [];
  #head = 0;
  #queuedOps = 0;
  #inFlight: Write | null = null;
  #inFlightDone: Promise<void> = Promise.resolve();
  #retry: Write | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  #attempt = 0;
  #suspended = false;
  #closed = false;
  #waiters: (() => void)[] = [];
  #roomWaiters: RoomWaiter[] = [];
  readonly #unwatch: () => void;
  lastAppliedSeq: number | null = null;
  /** Times the index reported this pod's writes lost, by reason (kinference_collector_index_lost_total). */
  readonly losses: Record<IndexLossReason, number> = { missing: 0, rolled_back: 0, overwritten: 0 };

  constructor(
    readonly index: IndexWriter,
    readonly pod: PodRef,
    readonly opts: ApplyQueueOptions,
    readonly hooks: ApplyQueueHooks,
    /** The clock of appliedAtMs (the stream's). */
    readonly now: () => number = Date.now,
  ) {
    this.#unwatch = index.onWritesLost?.(pod, (reason) => this.#lost(reason)) ?? (() => {});
  }

  get queuedOps(): number {
    return this.#queuedOps;
  }

  get queuedBatches(): number {
    return (
      this.#pending.length -
      this.#head +
      (this.#retry?.batches.length ?? 0) +
      (this.#inFlight?.batches.length ?? 0)
    );
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
    this.#unwatch();
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

  /** The write to send next: the one to retry, as it was, or a new one from the queue (null: nothing). */
  #next(): Write | null {
    if (this.#retry !== null) {
      const r = this.#retry;
      this.#retry = null;
      return r;
    }
    const batches = this.#take();
    if (batches.length === 0) return null;
    let n = 0;
    for (const b of batches) n += countOps(b.ops);
    return { batches, ops: mergeOps(batches.map((b) => b.ops)), n, id: nextApplyId() };
  }

  #take(): QueuedBatch[] {
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
    const write = this.#next();
    if (write === null) return this.#wake();
    this.#inFlight = write;
    const { batches, ops, n } = write;
    const t0 = performance.now();
    this.#inFlightDone = this.index.apply(this.pod, ops, write.id).then(
      () => {
        this.#inFlight = null;
        if (this.#suspended || this.#closed) return this.#wake();
        this.#queuedOps -= n;
        this.#attempt = 0;
        this.lastAppliedSeq = batches[batches.length - 1]!.seq;
        this.hooks.applied(batches, this.now(), performance.now() - t0, countOps(ops));
        this.#wake();
        this.#pump();
      },
      (err: unknown) => {
        this.#inFlight = null;
        // Even while suspended: the lease is gone whatever else happened meanwhile.
        if (err instanceof LeaseLostError) return this.#leaseLost(err);
        if (this.#suspended || this.#closed) return this.#wake();
        this.#attempt++;
        this.hooks.failed(err, this.#attempt);
        // The write may have run (a timeout, a dropped connection): resend it as it was, same id, so the
        // index can tell and skip it.
        this.#retry = write;
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
    const batches = this.queuedBatches - (this.#inFlight?.batches.length ?? 0);
    const ops = this.#queuedOps - (this.#inFlight?.n ?? 0);
    this.#pending = [];
    this.#head = 0;
    this.#retry = null;
    this.#queuedOps = 0;
    return { ops, batches };
  }

  #overflow(incomingOps: number): void {
    const dropped = this.#suspend();
    this.hooks.overflow(dropped.ops + incomingOps, dropped.batches + 1);
    this.#wake();
    this.#probeLater();
  }

  /** The index lost this pod's writes: what is queued builds on them, so drop it and rebuild. */
  #lost(reason: IndexLossReason): void {
    // Already suspended (an overflow, or a loss reported twice): the recovery ahead rebuilds anyway.
    if (this.#closed) return;
    this.losses[reason]++;
    if (this.#suspended) return;
    const dropped = this.#suspend();
    this.hooks.lost?.(reason, dropped.ops, dropped.batches);
    this.#wake();
    this.#probeLater();
  }

  /**
   * Refused by the writer fence: a retry would be refused too, and every queued write builds on a pod
   * another process now writes. Drop it all and stay suspended, with no probe: this queue never writes
   * again (the owner stops).
   */
  #leaseLost(err: LeaseLostError): void {
    if (this.#closed) return this.#wake();
    this.#suspend();
    this.#wake();
    this.hooks.leaseLost?.(err);
  }

  #suspend(): { ops: number; batches: number } {
    const dropped = this.#dropAll();
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    this.#suspended = true;
    return dropped;
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
          if (err instanceof LeaseLostError) return this.#leaseLost(err);
          this.#attempt++;
          this.hooks.failed(err, this.#attempt);
          this.#probeLater();
        },
      );
    }, this.#backoff());
  }
}
