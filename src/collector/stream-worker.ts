// Follows one pod's (DP rank's) KV-event stream: subscribe, order, replay gaps, map and apply to the index.
import { LeaseLostError, type HandoffStore, type IndexWriter, type PodRef } from '../index/index.js';
import { KeyMapper } from './key-mapper.js';
import type { Logger } from './logger.js';
import { ApplyQueue, type QueuedBatch } from './ops/apply-queue.js';
import { PodStateWriter, type PodStatePatch } from './ops/pod-state-writer.js';
import type { StreamSpec } from './pods.js';
import { DropReport, newStreamStats, type StreamStats } from './stream-stats.js';
import { StreamState, internalError, type StreamContext, type StreamSettings } from './stream/context.js';
import { HandoffStep } from './stream/handoff-step.js';
import { IngestLoop } from './stream/ingest.js';
import { PodWrites } from './stream/pod-writes.js';
import { Resync } from './stream/resync.js';
import { DEFAULT_MAX_FRAME_BYTES, EventSubscriber } from './transport/subscriber.js';

export { APPLIED_WINDOW, type StreamSettings } from './stream/context.js';
export { LIVE_DROP_REPLAYS } from './stream/ingest.js';

/** Well inside the router's default stale_after_ms (10 s); the same cadence as the default scrape. */
export const FRESHNESS_INTERVAL_MS = 1000;

export interface StreamObserver {
  applied(worker: StreamWorker, batches: readonly QueuedBatch[], appliedAtMs: number, applyMs: number): void;
  /**
   * The index refused one of this stream's writes (KINF_ERR_LEASE_LOST): another process holds the
   * writer lease. The stream's queue and state writer have stopped writing; the owner must stop it all.
   */
  leaseLost?(worker: StreamWorker, err: LeaseLostError): void;
  /**
   * The stream went on from a previous collector's handoff, which saw the engine's process start at
   * `processStartSec` (null: not scraped): the owner checks it against the engine's, a restart in between.
   */
  resumed?(worker: StreamWorker, processStartSec: number | null): void;
  /** The engine's process start time as last scraped (null: unknown), for a checkpoint's handoff. */
  processStartSec?(worker: StreamWorker): number | null;
}

/**
 * One pod's (one DP rank's) KV-event stream, end to end: ZMQ SUB → sequence check → decode → our keys →
 * ordered, batched index writes. Sequence rules (sequence.ts; docs/collector.md "Sequence numbers"):
 * - the next number: ingest;
 * - a jump: replay the missing range from the pod's ROUTER; if replay is absent or cannot cover it, clear
 *   the pod (epoch) and rebuild from new events — after a clear any contiguous run is consistent;
 * - a number at or below the last: a duplicate (same bytes as applied) or an out-of-order straggler is
 *   dropped; a new process (other bytes under a used number, or the replay buffer no longer holds our last
 *   batch, or without replay a later timestamp) is a restart: forget its hashes, clear, replay from 0.
 * Every replay asks from the last batch applied, so it also tells whether the publisher is still the same
 * process. The pod is also cleared when the stream starts (what the index holds may predate a restart we
 * missed), then rebuilt from the replay buffer when the SUB socket connects. Everything runs on one logical
 * thread per stream: live batches wait in a bounded inbox while a replay is in progress.
 *
 * This class is the composition and the lifecycle (start, stop, the timer, the connection); the parts are
 * in stream/: the ingest loop (ingest.ts), resync and replay (resync.ts), the hand-off between collectors
 * (handoff-step.ts) and the pod writes they all go through (pod-writes.ts), sharing one StreamState.
 */
export class StreamWorker {
  readonly stats: StreamStats = newStreamStats();
  readonly pod: PodRef;
  readonly mapper: KeyMapper;
  readonly queue: ApplyQueue;
  readonly writer: PodStateWriter;
  readonly #now: () => number;
  readonly #state = new StreamState();
  readonly #writes: PodWrites;
  readonly #resync: Resync;
  readonly #handoff: HandoffStep;
  readonly #ingest: IngestLoop;
  readonly #drops: DropReport;
  #sub: EventSubscriber | null = null;
  #connectQueued = false;
  #timer: NodeJS.Timeout | null = null;
  /** stop() flushed every queued write, and none was lost: the index holds exactly what was ingested. */
  #flushedClean = false;

  constructor(
    readonly spec: StreamSpec,
    readonly settings: StreamSettings,
    readonly index: IndexWriter & HandoffStore,
    readonly log: Logger,
    readonly observer: StreamObserver,
  ) {
    const now = settings.now ?? Date.now;
    this.#now = now;
    this.pod = { model: spec.model, podId: spec.podId };
    this.mapper = new KeyMapper(spec.model, settings.blockSize, settings.blockMapMaxEntries);
    this.#drops = new DropReport(log, undefined, now);
    this.writer = new PodStateWriter(index, this.pod, (err) => {
      if (err instanceof LeaseLostError) return this.observer.leaseLost?.(this, err);
      this.stats.stateWriteErrors++;
      this.log.debug('pod state write failed', { err });
    });
    this.queue = new ApplyQueue(
      index,
      this.pod,
      settings.queue,
      {
        applied: (batches, appliedAtMs, applyMs, ops) => {
          this.stats.applyCalls++;
          this.stats.appliedBatches += batches.length;
          this.stats.appliedOps += ops;
          // address rides along: it re-registers the pod if the index lost its state (e.g. Redis restarted).
          this.writer.write({ address: this.spec.address, lastEventAtMs: appliedAtMs });
          this.#state.freshAtMs = appliedAtMs;
          // A throwing observer (a metrics library, a hook) must not end the process or stop the queue.
          try {
            this.observer.applied(this, batches, appliedAtMs, applyMs);
          } catch (err) {
            internalError(this, 'observer', err);
          }
        },
        failed: (err, attempt) => {
          this.stats.applyErrors++;
          if (attempt === 1 || attempt % 20 === 0)
            this.log.warn('index write failed; retrying', { attempt, err });
        },
        overflow: (ops, batches) => {
          this.stats.overflows++;
          this.stats.droppedOps += ops;
          this.stats.droppedBatches += batches;
          this.#writes.setResyncing(true);
          this.log.error('index unavailable and write queue full: dropped queue, pod resyncs on recovery', {
            ops,
            batches,
          });
        },
        // Redis lost this pod's writes (restarted empty or from an older snapshot, flushed): same recovery.
        lost: (reason, ops, batches) => {
          this.stats.droppedOps += ops;
          this.stats.droppedBatches += batches;
          this.#writes.setResyncing(true);
          this.log.warn("index lost this pod's writes: clearing and rebuilding it", {
            reason,
          });
        },
        recovered: () => {
          this.log.info('index reachable again: clearing and rebuilding pod');
          this.#state.recoveryPending = true;
          this.writer.write({ address: this.spec.address, resyncing: true });
          this.#ingest.control(async () => this.#resync.request('recovery', null));
        },
        probe: () => index.upsertPodState(this.pod, { resyncing: true }),
        leaseLost: (err) => this.observer.leaseLost?.(this, err),
      },
      now,
    );
    const cx: StreamContext = {
      spec,
      settings,
      pod: this.pod,
      index,
      log,
      stats: this.stats,
      mapper: this.mapper,
      queue: this.queue,
      writer: this.writer,
      drops: this.#drops,
      owner: {
        leaseLost: (err) => this.observer.leaseLost?.(this, err),
        resumed: (processStartSec) => this.observer.resumed?.(this, processStartSec),
        processStartSec: () => this.observer.processStartSec?.(this) ?? null,
      },
      now,
      state: this.#state,
    };
    this.#writes = new PodWrites(cx);
    this.#resync = new Resync(cx, this.#writes, (run) => this.#ingest.control(run));
    this.#handoff = new HandoffStep(cx, this.#writes);
    this.#ingest = new IngestLoop(cx, this.#writes, this.#resync);
  }

  get lastSeq(): number | null {
    return this.#state.lastSeq;
  }

  /** PodState.partialSinceMs as this stream last wrote it. */
  get partialSinceMs(): number {
    return this.#state.partialSinceMs;
  }

  get resyncing(): boolean {
    return this.#state.resyncing;
  }

  get inboxLength(): number {
    return this.#ingest.length;
  }

  /** The SUB socket is connected to the pod's publisher (ZMQ connect/disconnect events). */
  get connected(): boolean {
    return this.#state.connected;
  }

  get #freshnessMs(): number {
    return this.settings.freshnessIntervalMs ?? FRESHNESS_INTERVAL_MS;
  }

  start(initial: PodStatePatch): void {
    this.writer.write({ ...initial, address: this.spec.address, resyncing: true });
    this.#state.resyncing = true;
    // The handoff is read before anything else of the stream runs: live batches wait in the inbox.
    if (this.spec.kvEvents && this.settings.handoff) this.#ingest.control(() => this.#handoff.take());
    else this.#writes.clear('start');
    if (this.spec.kvEvents) {
      this.#sub = new EventSubscriber({
        endpoint: this.spec.kvEvents,
        topic: this.spec.topic,
        receiveHighWaterMark: this.settings.receiveHighWaterMark,
        ...(this.settings.maxFrameBytes ? { maxFrameBytes: this.settings.maxFrameBytes } : {}),
        onMessage: (frames) => this.#ingest.onFrames(frames),
        onConnection: (event, address) => this.#onConnection(event, address),
        onError: (err) => this.log.error('kv event subscriber failed', { err }),
        onRefused: (address) => {
          this.stats.framesRefused++;
          this.log.warn('kv events connection dropped by ZMQ at a refused frame: reconnecting', {
            address,
            maxFrameBytes: this.settings.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
            cause: 'a frame over zmq_max_frame_bytes, or one that breaks ZMTP',
          });
        },
      });
      this.#sub.start();
    }
    // Rebuild from whatever the pod's buffer still holds. With a subscriber its connection does that
    // (#onConnection); a replay here as well would only run the same request twice, one after the other.
    if (!(this.#sub && this.spec.kvEventsReplay))
      this.#ingest.control(async () => this.#resync.request('first', null));
    const ms = this.#freshnessMs;
    if (ms > 0) this.#timer = setInterval(() => this.#tick(), Math.max(50, ms / 2)).unref();
  }

  /**
   * The pod's process start time changed (seen in /metrics): treat it as a restart, unless the event stream
   * already showed this one: a restart handled after the new process started. Handling it again would
   * clear what the new process has published since, and forget its hashes.
   */
  restartSignal(processStartSec: number | null = null): void {
    this.#ingest.control(async () => {
      const seen = this.#state.streamRestartAtMs;
      if (processStartSec !== null && seen !== null && seen >= processStartSec * 1000) {
        this.log.info('process start time changed: restart already handled from the event stream', {
          processStartSec,
          handledAt: new Date(seen).toISOString(),
        });
        return;
      }
      await this.#resync.request('restart_signal', null);
    });
  }

  /** Stops receiving; waits up to `flushTimeoutMs` for queued writes. Returns false if writes were left. */
  async stop(flushTimeoutMs: number): Promise<boolean> {
    const state = this.#state;
    state.stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    state.connected = false;
    this.#resync.stop();
    await this.#sub?.close();
    await this.#ingest.drained();
    this.#drops.flush(true);
    const deadline = new Promise<false>((r) => setTimeout(() => r(false), flushTimeoutMs).unref());
    const flushed = await Promise.race([this.queue.drained().then(() => true as const), deadline]);
    this.#flushedClean = flushed && !this.queue.suspended && !state.resyncing && !state.recoveryPending;
    await Promise.race([this.writer.settled(), deadline]);
    // Nothing of this stream may land after stop() returns (a removed pod must stay removed); writes in
    // flight are bounded by the index's command timeout.
    await this.queue.close();
    await this.writer.close();
    return flushed;
  }

  /**
   * After stop(): leaves what the next collector needs to go on from here (handoff.ts), unless the index may
   * not hold exactly what this stream ingested (writes left or lost, a resync cut short), there is nothing to
   * go on from (nothing ingested since the last clear), or `deadlineMs` (shutdown_timeout_ms, on the
   * stream's clock) has passed. Counts and logs the outcome; never throws.
   */
  saveHandoffAfterStop(deadlineMs: number): Promise<void> {
    return this.#handoff.saveAfterStop(deadlineMs, this.#state.stopped && this.#flushedClean);
  }

  #onConnection(event: 'connect' | 'disconnect', address: string): void {
    this.log.info(`kv events ${event}`, { address });
    if (this.#state.stopped) return;
    this.#state.connected = event === 'connect';
    // Batches published while we were not (yet) subscribed are lost to the SUB socket, and nothing reveals
    // the gap until the pod publishes again, which an idle pod may not do for a long time: on every
    // (re)connection, ask the replay buffer for what came after the last batch we have (at most one such
    // request waiting; a live batch arriving first cuts it short, see IngestLoop).
    if (event !== 'connect' || !this.spec.kvEventsReplay || this.#connectQueued) return;
    this.#connectQueued = true;
    this.#ingest.control(async () => {
      this.#connectQueued = false;
      return this.#resync.request('connect', null);
    });
  }

  /**
   * Timer: summarises dropped events, and keeps the pod's index fresh while nothing happens. While the SUB
   * socket is connected and everything received is written, the index is as current as the pod: an idle
   * pod publishes nothing and, without `metrics:`, nothing else would refresh lastEventAtMs, so the router
   * would discount its cached blocks as stale. Disconnected (the pod or the network died; ZMTP heartbeats
   * notice a silent peer), it stops, and the pod goes stale as it should. A quiet stream also checkpoints
   * its handoff here.
   */
  #tick(): void {
    const state = this.#state;
    this.#drops.flush();
    if (!state.connected || state.stopped || state.resyncing || this.#ingest.busy || this.#ingest.length > 0)
      return;
    if (this.queue.suspended || this.queue.queuedBatches > 0) return;
    const now = this.#now();
    this.#handoff.checkpoint(now);
    if (now - state.freshAtMs < this.#freshnessMs) return;
    state.freshAtMs = now;
    this.writer.write({ address: this.spec.address, lastEventAtMs: now });
  }
}
