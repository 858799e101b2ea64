// Follows one pod's (DP rank's) KV-event stream: subscribe, order, replay gaps, map and apply to the index.
import {
  LeaseLostError,
  type HandoffStore,
  type HandoffTake,
  type IndexOp,
  type IndexWriter,
  type PodRef,
} from '../index/index.js';
import {
  HANDOFF_VERSION,
  decodeHandoff,
  encodeHandoff,
  handoffMismatch,
  type StreamHandoff,
} from './handoff.js';
import { KeyMapper } from './key-mapper.js';
import type { Logger } from './logger.js';
import { ApplyQueue, type ApplyQueueOptions, type QueuedBatch } from './ops/apply-queue.js';
import { PodStateWriter, type PodStatePatch } from './ops/pod-state-writer.js';
import type { StreamSpec } from './pods.js';
import { DEFAULT_REPLAY_LIMITS, ReplayControl, type ReplayLimits } from './replay-control.js';
import { AppliedWindow, classifyBehind, classifySeq, payloadDigest, type BehindVerdict } from './sequence.js';
import {
  DropReport,
  dropExample,
  newStreamStats,
  type ClearReason,
  type DropKind,
  type ReplayResult,
  type StreamStats,
} from './stream-stats.js';
import { requestReplay } from './transport/replay-client.js';
import { EventSubscriber } from './transport/subscriber.js';
import { parseLiveFrames, type SequencedPayload } from './wire/frames.js';
import { decodeMsgpack } from './wire/msgpack.js';
import { parseVllmBatch } from './wire/vllm-events.js';

export interface StreamSettings {
  /** The router's block size for this model. */
  blockSize: number;
  blockMapMaxEntries: number;
  replayTimeoutMs: number;
  /** Live batches held while a replay runs; beyond it they are dropped, and replayed once the inbox drains. */
  liveBufferBatches: number;
  receiveHighWaterMark: number;
  queue: ApplyQueueOptions;
  /**
   * While the event stream is connected and caught up, the pod's lastEventAtMs is refreshed this often when
   * no write did (an idle pod's index is still current). Default FRESHNESS_INTERVAL_MS.
   */
  freshnessIntervalMs?: number;
  /**
   * Resume from the handoff a previous collector left at a clean stop (handoff.ts) instead of clearing the
   * pod at start. Off (the default here; the collector's `handoff` setting turns it on): every start clears.
   */
  handoff?: boolean;
  /**
   * With `handoff`: once the stream has been quiet this long (nothing queued for the index) and has changed
   * since its last handoff, save one then too, so that a collector that crashes or is killed still leaves a
   * valid handoff for every pod quiet that long. 0 or absent: only at a clean stop.
   */
  handoffCheckpointMs?: number;
  /** Replay control's bounds (replay-control.ts); the defaults unless a test says otherwise. */
  replayLimits?: ReplayLimits;
}

/** Well inside the router's default stale_after_ms (10 s); the same cadence as the default scrape. */
export const FRESHNESS_INTERVAL_MS = 1000;
/** Replays run back to back for live batches dropped during a replay, before it is left to the next gap. */
export const LIVE_DROP_REPLAYS = 3;
/** Applied batches whose digest is remembered, to recognise a duplicate and a new process. */
export const APPLIED_WINDOW = 256;

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

interface LiveItem {
  kind: 'live';
  msg: SequencedPayload;
  /** Arrived while a replay ran: if the replay brought the same batch, that is the expected overlap. */
  overlap: boolean;
}
interface ControlItem {
  kind: 'control';
  run: () => Promise<void>;
}
type InboxItem = LiveItem | ControlItem;

/**
 * Why a replay runs. connect: the SUB socket (re)connected; check: a batch went backwards and the replay
 * buffer decides what it is; live_dropped: live batches overflowed the inbox during a replay.
 */
type ResyncKind =
  'first' | 'connect' | 'gap' | 'restart' | 'check' | 'recovery' | 'restart_signal' | 'live_dropped';

/**
 * Two resyncs held back as one (replay-control.ts): a process restart seen in /metrics forgets the process
 * and clears, which also does a recovery's clear; a recovery clears; any other replays from the last batch.
 */
function mergeResync(a: ResyncKind, b: ResyncKind): ResyncKind {
  for (const k of ['restart_signal', 'recovery'] as const) if (a === k || b === k) return k;
  return a === 'connect' && b === 'connect' ? 'connect' : 'check';
}

/** One replay request in progress: stop() cuts it short, and so does a live batch if `liveCancels`. */
class ReplayRun {
  cancelled = false;
  /** It stopped at its bounds (batches or bytes): the rest is requested again. */
  bounded = false;
  bytes = 0;
  /** Batches it applied (not our last one, not duplicates). */
  applied = 0;
  /** Replies received: once the ROUTER answers, a live batch no longer cuts the replay short. */
  items = 0;
  #resolve: (v: null) => void = () => {};
  readonly done = new Promise<null>((r) => (this.#resolve = r));

  constructor(readonly liveCancels: boolean) {}

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.#resolve(null);
  }
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
 */
export class StreamWorker {
  readonly stats: StreamStats = newStreamStats();
  readonly pod: PodRef;
  readonly mapper: KeyMapper;
  readonly queue: ApplyQueue;
  readonly writer: PodStateWriter;
  readonly #drops: DropReport;
  #sub: EventSubscriber | null = null;
  #inbox: InboxItem[] = [];
  #head = 0;
  #busy = false;
  #resyncing = false;
  /** The index came back and a recovery resync is queued: until it has run, the pod is not rebuilt. */
  #recoveryPending = false;
  #stopped = false;
  #lastSeq: number | null = null;
  #drainDone: Promise<void> = Promise.resolve();
  /** Digests of the batches applied from the current publisher process. */
  readonly #window = new AppliedWindow(APPLIED_WINDOW);
  /** Publisher timestamp (s) of the last batch applied; null when unknown (none since a restart). */
  #lastTsSec: number | null = null;
  /** The ROUTER has returned batches: its buffer keeps them (vLLM buffer_steps > 0). */
  #bufferKeeps = false;
  #replayRun: ReplayRun | null = null;
  #connectQueued = false;
  #connected = false;
  /** Live batches dropped (inbox full) since the last replay that could bring them back. */
  #liveLost = 0;
  #liveLostReplays = 0;
  /** When a restart seen in the event stream itself was last handled (ms). */
  #streamRestartAtMs: number | null = null;
  /** When lastEventAtMs was last written (ms). */
  #freshAtMs = 0;
  #partialSinceMs = 0;
  #timer: NodeJS.Timeout | null = null;
  /** stop() flushed every queued write, and none was lost: the index holds exactly what was ingested. */
  #flushedClean = false;
  /** When something was last queued for the index (ms): a checkpoint waits for the stream to be quiet. */
  #changedAtMs = 0;
  /** The last batch a checkpoint was taken at (saved or refused), and one in flight. */
  #checkpointSeq: number | null = null;
  #checkpointing = false;
  readonly #replays: ReplayControl<ResyncKind>;
  /**
   * The first live batch whose resync was held back: the held resync handles it as its own trigger, so that
   * a replay that fails (no ROUTER, a timeout) still leaves it to the sequence rules. Later ones are dropped:
   * the replay brings them back.
   */
  #heldTrigger: SequencedPayload | null = null;
  /** A replay's own follow-up (the engine restarted; a rest past its bounds) runs without asking again. */
  readonly #limits: ReplayLimits;

  constructor(
    readonly spec: StreamSpec,
    readonly settings: StreamSettings,
    readonly index: IndexWriter & HandoffStore,
    readonly log: Logger,
    readonly observer: StreamObserver,
  ) {
    this.pod = { model: spec.model, podId: spec.podId };
    this.#limits = settings.replayLimits ?? DEFAULT_REPLAY_LIMITS;
    this.#replays = new ReplayControl<ResyncKind>(
      this.stats.replayControl,
      (kind) =>
        this.#control(() => {
          const trigger = this.#heldTrigger;
          this.#heldTrigger = null;
          return this.#resync(kind, trigger);
        }),
      mergeResync,
      this.#limits,
    );
    this.mapper = new KeyMapper(spec.model, settings.blockSize, settings.blockMapMaxEntries);
    this.#drops = new DropReport(log);
    this.writer = new PodStateWriter(index, this.pod, (err) => {
      if (err instanceof LeaseLostError) return this.observer.leaseLost?.(this, err);
      this.stats.stateWriteErrors++;
      this.log.debug('pod state write failed', { err });
    });
    this.queue = new ApplyQueue(index, this.pod, settings.queue, {
      applied: (batches, appliedAtMs, applyMs, ops) => {
        this.stats.applyCalls++;
        this.stats.appliedBatches += batches.length;
        this.stats.appliedOps += ops;
        // address rides along: it re-registers the pod if the index lost its state (e.g. Redis restarted).
        this.writer.write({ address: this.spec.address, lastEventAtMs: appliedAtMs });
        this.#freshAtMs = appliedAtMs;
        // A throwing observer (a metrics library, a hook) must not end the process or stop the queue.
        try {
          this.observer.applied(this, batches, appliedAtMs, applyMs);
        } catch (err) {
          this.#internalError('observer', err);
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
        this.#setResyncing(true);
        this.log.error('index unavailable and write queue full: dropped queue, pod resyncs on recovery', {
          ops,
          batches,
        });
      },
      // Redis lost this pod's writes (restarted empty or from an older snapshot, flushed): same recovery.
      lost: (reason, ops, batches) => {
        this.stats.droppedOps += ops;
        this.stats.droppedBatches += batches;
        this.#setResyncing(true);
        this.log.warn("index lost this pod's writes: clearing and rebuilding it", {
          reason,
        });
      },
      recovered: () => {
        this.log.info('index reachable again: clearing and rebuilding pod');
        this.#recoveryPending = true;
        this.writer.write({ address: this.spec.address, resyncing: true });
        this.#control(async () => this.#requestResync('recovery', null));
      },
      probe: () => index.upsertPodState(this.pod, { resyncing: true }),
      leaseLost: (err) => this.observer.leaseLost?.(this, err),
    });
  }

  get lastSeq(): number | null {
    return this.#lastSeq;
  }

  /** PodState.partialSinceMs as this stream last wrote it. */
  get partialSinceMs(): number {
    return this.#partialSinceMs;
  }

  get resyncing(): boolean {
    return this.#resyncing;
  }

  get inboxLength(): number {
    return this.#inbox.length - this.#head;
  }

  /** The SUB socket is connected to the pod's publisher (ZMQ connect/disconnect events). */
  get connected(): boolean {
    return this.#connected;
  }

  get #freshnessMs(): number {
    return this.settings.freshnessIntervalMs ?? FRESHNESS_INTERVAL_MS;
  }

  start(initial: PodStatePatch): void {
    this.writer.write({ ...initial, address: this.spec.address, resyncing: true });
    this.#resyncing = true;
    // The handoff is read before anything else of the stream runs: live batches wait in the inbox.
    if (this.spec.kvEvents && this.settings.handoff) this.#control(() => this.#takeHandoff());
    else this.#clearPod('start');
    if (this.spec.kvEvents) {
      this.#sub = new EventSubscriber({
        endpoint: this.spec.kvEvents,
        topic: this.spec.topic,
        receiveHighWaterMark: this.settings.receiveHighWaterMark,
        onMessage: (frames) => this.#onFrames(frames),
        onConnection: (event, address) => this.#onConnection(event, address),
        onError: (err) => this.log.error('kv event subscriber failed', { err }),
      });
      this.#sub.start();
    }
    // Rebuild from whatever the pod's buffer still holds. With a subscriber its connection does that
    // (#onConnection); a replay here as well would only run the same request twice, one after the other.
    if (!(this.#sub && this.spec.kvEventsReplay))
      this.#control(async () => this.#requestResync('first', null));
    const ms = this.#freshnessMs;
    if (ms > 0) this.#timer = setInterval(() => this.#tick(), Math.max(50, ms / 2)).unref();
  }

  /**
   * The pod's process start time changed (seen in /metrics): treat it as a restart, unless the event stream
   * already showed this one: a restart handled after the new process started. Handling it again would
   * clear what the new process has published since, and forget its hashes.
   */
  restartSignal(processStartSec: number | null = null): void {
    this.#control(async () => {
      const seen = this.#streamRestartAtMs;
      if (processStartSec !== null && seen !== null && seen >= processStartSec * 1000) {
        this.log.info('process start time changed: restart already handled from the event stream', {
          processStartSec,
          handledAt: new Date(seen).toISOString(),
        });
        return;
      }
      await this.#requestResync('restart_signal', null);
    });
  }

  /** Stops receiving; waits up to `flushTimeoutMs` for queued writes. Returns false if writes were left. */
  async stop(flushTimeoutMs: number): Promise<boolean> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#connected = false;
    this.#replayRun?.cancel();
    this.#replays.stop();
    this.#heldTrigger = null;
    await this.#sub?.close();
    await this.#drainDone;
    this.#drops.flush(true);
    const deadline = new Promise<false>((r) => setTimeout(() => r(false), flushTimeoutMs).unref());
    const flushed = await Promise.race([this.queue.drained().then(() => true as const), deadline]);
    this.#flushedClean = flushed && !this.queue.suspended && !this.#resyncing && !this.#recoveryPending;
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
   * go on from (nothing ingested since the last clear), or `deadlineMs` (shutdown_timeout_ms) has passed.
   * Counts and logs the outcome; never throws.
   */
  async saveHandoffAfterStop(deadlineMs: number): Promise<void> {
    if (!this.spec.kvEvents) return;
    if (Date.now() > deadlineMs) {
      this.stats.handoffSaves.timeout++;
      this.log.warn('no handoff for the next collector: shutdown_timeout_ms is spent; it will clear the pod');
      return;
    }
    const h = this.#stopped && this.#flushedClean ? this.#handoffNow(Date.now()) : null;
    if (h === null) {
      this.stats.handoffSaves.not_ready++;
      this.log.info(
        'no handoff for the next collector (writes left unflushed or lost, or nothing applied since a clear): it will clear the pod',
      );
      return;
    }
    const r = await this.#saveHandoff(h, 'saved');
    if (r.saved)
      this.log.info('handoff saved for the next collector', {
        lastSeq: h.lastSeq,
        blocks: h.mapper.entries.length,
      });
    else if (r.err !== undefined)
      this.log.warn('handoff not saved: the next collector will clear the pod', { err: r.err });
  }

  /**
   * Saves a handoff and counts it: as `kind` if stored, not_ready if the index refused it (the pod is unknown
   * to it, or was written after the handoff was taken), failed with the error otherwise. A lost lease goes to
   * the observer, uncounted.
   */
  async #saveHandoff(
    h: StreamHandoff,
    kind: 'saved' | 'checkpointed',
  ): Promise<{ saved: boolean; err?: unknown }> {
    try {
      const saved = await this.index.saveHandoff(this.pod, encodeHandoff(h));
      this.stats.handoffSaves[saved ? kind : 'not_ready']++;
      return { saved };
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.observer.leaseLost?.(this, err);
        return { saved: false };
      }
      this.stats.handoffSaves.failed++;
      return { saved: false, err };
    }
  }

  #handoffNow(nowMs: number): StreamHandoff | null {
    if (!this.spec.kvEvents || this.#lastSeq === null) return null;
    return {
      v: HANDOFF_VERSION,
      model: this.pod.model,
      podId: this.pod.podId,
      endpoint: this.spec.kvEvents,
      topic: this.spec.topic,
      blockSize: this.settings.blockSize,
      lastSeq: this.#lastSeq,
      lastTsSec: this.#lastTsSec,
      window: this.#window.entries(),
      bufferKeeps: this.#bufferKeeps,
      partialSinceMs: this.#partialSinceMs,
      processStartSec: this.observer.processStartSec?.(this) ?? null,
      mapper: this.mapper.snapshot(),
      savedAtMs: nowMs,
    };
  }

  // ---- handoff -----------------------------------------------------------------------------------

  /**
   * From the timer, with the stream idle and its writes all confirmed: a handoff of the stream as it stands,
   * once it has been quiet handoffCheckpointMs since it last changed. It is saved off the stream's path; a
   * write landing meanwhile makes the index refuse it, and the next quiet spell takes another.
   */
  #checkpoint(now: number): void {
    const every = this.settings.handoffCheckpointMs ?? 0;
    if (!this.settings.handoff || every <= 0 || this.#checkpointing) return;
    if (this.#lastSeq === null || this.#lastSeq === this.#checkpointSeq || now - this.#changedAtMs < every)
      return;
    const h = this.#handoffNow(now);
    if (h === null) return;
    this.#checkpointing = true;
    this.#checkpointSeq = h.lastSeq;
    void this.#saveHandoff(h, 'checkpointed').then((r) => {
      this.#checkpointing = false;
      if (r.err === undefined) return;
      this.#checkpointSeq = null; // try again after the next quiet spell
      this.#changedAtMs = now;
      this.log.debug('handoff checkpoint not saved', { err: r.err });
    });
  }

  /** At start: go on from the previous collector's handoff if it still describes the index, else clear. */
  async #takeHandoff(): Promise<void> {
    let take: HandoffTake;
    try {
      take = await this.index.takeHandoff(this.pod);
    } catch (err) {
      if (err instanceof LeaseLostError) return this.observer.leaseLost?.(this, err);
      this.stats.handoffTakes.error++;
      this.log.warn("the previous collector's handoff could not be read: clearing the pod", { err });
      return this.#clearPod('start');
    }
    if (this.#stopped) return;
    const h = this.#usableHandoff(take);
    if (h === null) return this.#clearPod('start');
    this.#resume(h);
  }

  #usableHandoff(take: HandoffTake): StreamHandoff | null {
    if (take.kind === 'none') {
      this.stats.handoffTakes.none++;
      return null;
    }
    if (take.kind === 'stale') {
      this.stats.handoffTakes.stale++;
      this.log.info(
        "the previous collector's handoff is stale (the pod was written since): clearing the pod",
      );
      return null;
    }
    const d = decodeHandoff(take.record);
    if (!d.ok) {
      this.stats.handoffTakes.invalid++;
      this.log.warn("the previous collector's handoff is unusable: clearing the pod", { detail: d.detail });
      return null;
    }
    const why = handoffMismatch(d.handoff, {
      model: this.pod.model,
      podId: this.pod.podId,
      endpoint: this.spec.kvEvents ?? '',
      topic: this.spec.topic,
      blockSize: this.settings.blockSize,
    });
    if (why !== null) {
      this.stats.handoffTakes.mismatch++;
      this.log.info("the previous collector's handoff is for another stream: clearing the pod", { why });
      return null;
    }
    return d.handoff;
  }

  /**
   * Takes the previous collector's place: its hashes, its last batch and the digests before it. The replay
   * at connection then asks from that batch, which tells a continuation from a gap or an engine restart.
   */
  #resume(h: StreamHandoff): void {
    const ops = this.mapper.restore(h.mapper, this.stats);
    if (ops.length > 0) this.#enqueue(ops, -1, Date.now()); // a smaller block_map_max_entries than before
    this.#window.restore(h.window);
    this.#lastSeq = h.lastSeq;
    this.#lastTsSec = h.lastTsSec;
    this.#bufferKeeps = h.bufferKeeps;
    this.#partialSinceMs = h.partialSinceMs;
    this.writer.write({ partialSinceMs: h.partialSinceMs });
    this.stats.handoffTakes.resumed++;
    this.log.info("resumed from the previous collector's handoff: the pod is not cleared", {
      lastSeq: h.lastSeq,
      blocks: h.mapper.entries.length,
      savedAgoMs: Date.now() - h.savedAtMs,
    });
    this.observer.resumed?.(this, h.processStartSec);
  }

  // ---- connection and freshness ------------------------------------------------------------------

  #onConnection(event: 'connect' | 'disconnect', address: string): void {
    this.log.info(`kv events ${event}`, { address });
    if (this.#stopped) return;
    this.#connected = event === 'connect';
    // Batches published while we were not (yet) subscribed are lost to the SUB socket, and nothing reveals
    // the gap until the pod publishes again, which an idle pod may not do for a long time: on every
    // (re)connection, ask the replay buffer for what came after the last batch we have (at most one such
    // request waiting; a live batch arriving first cuts it short, see #onFrames).
    if (event !== 'connect' || !this.spec.kvEventsReplay || this.#connectQueued) return;
    this.#connectQueued = true;
    this.#control(async () => {
      this.#connectQueued = false;
      return this.#requestResync('connect', null);
    });
  }

  /**
   * Timer: summarises dropped events, and keeps the pod's index fresh while nothing happens. While the SUB
   * socket is connected and everything received is written, the index is as current as the pod: an idle
   * pod publishes nothing and, without `metrics:`, nothing else would refresh lastEventAtMs, so the router
   * would discount its cached blocks as stale. Disconnected (the pod or the network died; ZMTP heartbeats
   * notice a silent peer), it stops, and the pod goes stale as it should.
   */
  #tick(): void {
    this.#drops.flush();
    if (!this.#connected || this.#stopped || this.#resyncing || this.#busy || this.inboxLength > 0) return;
    if (this.queue.suspended || this.queue.queuedBatches > 0) return;
    const now = Date.now();
    this.#checkpoint(now);
    if (now - this.#freshAtMs < this.#freshnessMs) return;
    this.#freshAtMs = now;
    this.writer.write({ address: this.spec.address, lastEventAtMs: now });
  }

  // ---- inbox -------------------------------------------------------------------------------------

  /** From the subscriber's receive loop: an exception here would end the stream's loop, so none leaves. */
  #onFrames(frames: Buffer[]): void {
    try {
      this.#onFrame(frames);
    } catch (err) {
      this.#internalError('ingest', err);
    }
  }

  /**
   * An exception contained in the stream: a bug, not the input's fault (the decoder rejects bad input).
   * Counted and logged (the first 10, then every 1000th); the stream goes on with the next batch.
   */
  #internalError(stage: 'ingest' | 'observer', err: unknown): void {
    const n = ++this.stats.internalErrors[stage];
    if (n <= 10 || n % 1000 === 0)
      this.log.error(`stream ${stage} failed; the stream goes on`, { stage, count: n, err });
  }

  #onFrame(frames: Buffer[]): void {
    this.stats.framesReceived++;
    const r = parseLiveFrames(frames);
    if (!r.ok) {
      this.stats.malformedFrames++;
      if (this.stats.malformedFrames <= 10) this.log.warn('malformed kv event frame', { detail: r.detail });
      return;
    }
    if (this.#stopped) return;
    if (this.queue.suspended) {
      this.stats.liveDropped++; // the recovery replay brings them back
      return;
    }
    if (this.inboxLength >= this.settings.liveBufferBatches) {
      this.stats.liveDropped++;
      this.#liveLost++; // replayed once the inbox has drained (#repairLiveLoss)
      return;
    }
    // A live batch answers what the connection replay asks (did anything happen while we were away?): if
    // the ROUTER has not begun to answer, stop waiting for it. A slow or absent ROUTER must not hold back
    // the stream, and this batch is classified like any other.
    const run = this.#replayRun;
    if (run !== null && run.liveCancels && run.items === 0) run.cancel();
    // Fast path: nothing queued, in order — no promise, no inbox.
    if (!this.#busy && this.inboxLength === 0 && this.#lastSeq !== null && r.msg.seq === this.#lastSeq + 1) {
      this.#ingest(r.msg);
      return;
    }
    this.#inbox.push({ kind: 'live', msg: r.msg, overlap: this.#replayRun !== null });
    this.#kick();
  }

  #control(run: () => Promise<void>): void {
    this.#inbox.push({ kind: 'control', run });
    this.#kick();
  }

  #kick(): void {
    if (!this.#busy) this.#drainDone = this.#drain();
  }

  async #drain(): Promise<void> {
    this.#busy = true;
    try {
      while (!this.#stopped) {
        if (this.#head >= this.#inbox.length && !this.#repairLiveLoss()) break;
        const item = this.#inbox[this.#head]!;
        this.#inbox[this.#head++] = undefined as unknown as InboxItem;
        try {
          if (item.kind === 'control') await item.run();
          else {
            const p = this.#onLive(item);
            if (p) await p;
          }
        } catch (err) {
          this.#internalError('ingest', err);
        }
      }
    } finally {
      this.#inbox = this.#inbox.slice(this.#head);
      this.#head = 0;
      this.#busy = false;
      if (this.#inbox.length > 0 && !this.#stopped) this.#kick();
    }
  }

  /**
   * Live batches dropped while a replay ran (inbox full) are still in the pod's replay buffer: once the
   * inbox has drained, ask for them, since an idle pod would never show the gap. A few times in a row at
   * most: a pod that publishes faster than the replays catch up is left to the next gap. Returns true when
   * it queued a replay.
   */
  #repairLiveLoss(): boolean {
    const dropped = this.#liveLost;
    if (dropped === 0) {
      this.#liveLostReplays = 0;
      return false;
    }
    this.#liveLost = 0;
    if (!this.spec.kvEventsReplay || this.queue.suspended) return false;
    if (this.#liveLostReplays >= LIVE_DROP_REPLAYS) {
      this.log.warn(
        'live batches keep overflowing live_buffer_batches during replays: the next sequence gap replays them',
        { dropped, replays: this.#liveLostReplays },
      );
      this.#liveLostReplays = 0;
      return false;
    }
    this.#liveLostReplays++;
    this.stats.liveDropReplays++;
    this.log.warn('live batches were dropped while a replay ran (live_buffer_batches full): replaying them', {
      dropped,
      after: this.#lastSeq,
      attempt: this.#liveLostReplays,
    });
    this.#inbox.push({ kind: 'control', run: async () => this.#requestResync('live_dropped', null) });
    return true;
  }

  #onLive(item: LiveItem): Promise<void> | undefined {
    const { msg } = item;
    const pos = classifySeq(this.#lastSeq, msg.seq);
    switch (pos.kind) {
      case 'next':
        this.#ingest(msg);
        return undefined;
      case 'first':
        if (msg.seq === 0) {
          this.#ingest(msg);
          return undefined;
        }
        return this.#requestResync('first', msg);
      case 'gap':
        this.stats.gaps++;
        this.stats.missingBatches += pos.missing;
        if (this.stats.gaps <= 10 || this.stats.gaps % 1000 === 0)
          this.log.warn('sequence gap', { expected: pos.expected, got: msg.seq, gaps: this.stats.gaps });
        return this.#requestResync('gap', msg);
      case 'behind': {
        const v = this.#judgeBehind(msg, null, this.spec.kvEventsReplay !== undefined, item.overlap);
        if (v === 'restart') return this.#requestResync('restart', msg);
        if (v === 'ask') return this.#requestResync('check', msg);
        return undefined;
      }
    }
  }

  /**
   * A batch numbered at or below the last one applied (sequence.ts classifyBehind): counts and logs a
   * duplicate, an out-of-order batch or a restart, and returns the verdict; the caller acts on it. A
   * duplicate that a replay brought (`overlap`) is expected, and only counted.
   */
  #judgeBehind(
    msg: SequencedPayload,
    sameProcess: boolean | null,
    canAsk: boolean,
    overlap: boolean,
  ): BehindVerdict {
    const applied = this.#window.lookup(msg.seq, payloadDigest(msg.payload));
    const newer = applied === 'unknown' && sameProcess === null && !canAsk ? this.#isNewer(msg) : null;
    const v = classifyBehind({ applied, sameProcess, canAsk, newer });
    const last = this.#lastSeq;
    if (v === 'duplicate') {
      this.stats.duplicates++;
      if (!overlap) this.#drops.note('duplicate', 1, () => ({ seq: msg.seq, last }));
    } else if (v === 'out_of_order') {
      this.stats.outOfOrder++;
      this.#drops.note('out_of_order', 1, () => ({
        seq: msg.seq,
        last,
        evidence:
          sameProcess === true
            ? 'the replay buffer still holds the last batch applied'
            : 'published no later than the last batch applied',
      }));
    } else if (v === 'restart') {
      this.stats.restarts++;
      this.#streamRestartAtMs = Date.now();
      this.log.warn('sequence went backwards with new content: engine restarted', {
        last,
        got: msg.seq,
        evidence:
          applied === 'different'
            ? 'other bytes under a number already applied'
            : sameProcess === false
              ? 'the replay buffer no longer holds the last batch applied'
              : 'published after the last batch applied',
      });
    }
    return v;
  }

  /** Whether the batch's publisher timestamp is later than the last applied one's (null: cannot tell). */
  #isNewer(msg: SequencedPayload): boolean | null {
    if (this.#lastTsSec === null) return null;
    const r = parseVllmBatch(msg.payload);
    return r.ok ? r.batch.tsSec > this.#lastTsSec : null;
  }

  // ---- resync ------------------------------------------------------------------------------------

  /**
   * A resync that would replay goes through replay control (replay-control.ts): it runs now, or is held back
   * as the one pending resync, which then replays from the last batch applied. Held back, its trigger is
   * dropped: the engine's replay buffer holds it if the engine published it. One that needs no replay (no
   * replay endpoint, or a fresh stream meeting the engine's seq 0) runs at once.
   */
  #requestResync(kind: ResyncKind, trigger: SequencedPayload | null): Promise<void> | undefined {
    const replays = this.spec.kvEventsReplay !== undefined && !(this.#lastSeq === null && trigger?.seq === 0);
    if (!replays || this.#stopped) return this.#resync(kind, trigger);
    const d = this.#replays.request(kind, Date.now());
    if (d === 'run') return this.#resync(kind, trigger);
    if (d !== 'coalesced')
      this.log.info('replay held back', { kind, reason: d, after: this.#lastSeq, trigger: trigger?.seq });
    this.#heldTrigger ??= trigger;
    // Until the pending resync has run, the index may lag the pod.
    this.#setResyncing(true);
    return undefined;
  }

  async #resync(kind: ResyncKind, trigger: SequencedPayload | null): Promise<void> {
    if (kind === 'restart' || kind === 'restart_signal') {
      this.#forgetProcess(kind);
      // The clear of a recovery waiting behind this one is done: the pod is rebuilt from here.
      this.#recoveryPending = false;
    } else if (kind === 'recovery') {
      this.#recoveryPending = false;
      this.#clearPod('recovery');
    }
    let sameProcess: boolean | null = null;
    // Now either fresh (lastSeq null: nothing ingested since the last clear) or after lastSeq. Fresh, a
    // live seq 0 needs nothing older.
    if (this.spec.kvEventsReplay && !(this.#lastSeq === null && trigger?.seq === 0)) {
      this.#setResyncing(true);
      const first = await this.#replay(kind === 'connect');
      sameProcess = first.same;
      let bounded = first.bounded;
      if (sameProcess === false && !this.#stopped) {
        this.stats.restarts++;
        this.#streamRestartAtMs = Date.now();
        this.log.warn('engine restarted: its replay buffer no longer holds the last batch applied', {
          last: this.#lastSeq,
        });
        this.#forgetProcess('restart');
        sameProcess = null; // a fact about the old process
        bounded = (await this.#replay(false)).bounded;
      }
      if (bounded && !this.#stopped) {
        // The rest of the buffer comes with the next replay, which also takes the trigger.
        this.#heldTrigger ??= trigger;
        this.#replays.bounded('check', Date.now());
        this.#setResyncing(true);
        return;
      }
    }
    if (trigger !== null && !this.#stopped) await this.#afterResync(trigger, sameProcess);
    // The index may have lost this pod's writes meanwhile (dropped queue, suspended writes): what was just
    // replayed is gone, and the pod stays resyncing until the recovery ahead has rebuilt it.
    this.#setResyncing(this.queue.suspended || this.#recoveryPending);
  }

  /**
   * Replays the pod's buffer after the last batch applied (from 0 when none). It asks from that last batch
   * itself: still there with the same bytes, the publisher is the process we follow (returns true); other
   * bytes there, or nothing at or after it from a buffer that keeps batches, it is a new process (returns
   * false, having applied nothing). Returns null when it cannot tell.
   */
  async #replay(liveCancels: boolean): Promise<{ same: boolean | null; bounded: boolean }> {
    const probe = this.#lastSeq;
    const from = probe ?? 0;
    const keeps = this.#bufferKeeps;
    const run = new ReplayRun(liveCancels);
    this.#replayRun = run;
    let first: number | null = null;
    let same: boolean | null = null;
    const request = requestReplay(this.spec.kvEventsReplay!, from, this.settings.replayTimeoutMs, (m) => {
      if (this.#stopped || run.cancelled) return false;
      // Bounded: past REPLAY_MAX_BATCHES / _BYTES this replay stops, and the next one goes on from here.
      run.bytes += m.payload.length;
      // Only once this replay has applied something: one batch above the byte bound must not stop every replay
      // at the same place.
      const over = run.items >= this.#limits.maxBatches || run.bytes > this.#limits.maxBytes;
      if (over && run.applied > 0) {
        run.bounded = true;
        return false;
      }
      run.items++;
      first ??= m.seq;
      this.stats.replayedBatches++;
      this.#bufferKeeps = true;
      if (probe !== null && m.seq === probe && same === null) {
        const known = this.#window.lookup(m.seq, payloadDigest(m.payload));
        if (known === 'different') {
          same = false;
          return false;
        }
        if (known === 'same') same = true;
        return true; // our last batch: already applied
      }
      if (this.#lastSeq !== null && m.seq <= this.#lastSeq) {
        this.stats.duplicates++;
      } else if (this.#lastSeq === null || m.seq === this.#lastSeq + 1) {
        this.#ingest(m);
        run.applied++;
      } else {
        // The buffer no longer holds what we miss: clear, and start a fresh contiguous run here.
        this.#clearPod('gap');
        this.#ingest(m);
        run.applied++;
      }
      // A replay is a burst: let the index catch up rather than overflow the write queue.
      const room = this.settings.queue.maxQueuedOps / 2;
      return this.queue.queuedOps > room
        ? this.queue.waitForRoom(room).then(() => !this.#stopped && !run.cancelled)
        : true;
    });
    const outcome = await Promise.race([request, run.done]);
    if (this.#replayRun === run) this.#replayRun = null;
    if (outcome === null) {
      // The request may still get its answer; requestReplay then stops at the first item and closes.
      this.stats.replays.cancelled++;
      this.log.debug('replay cut short', {
        from,
        reason: this.#stopped ? 'stopping' : 'a live batch came first',
      });
      return { same: null, bounded: false };
    }
    // A buffer known to keep batches with nothing at or after our last one: a new process with fewer.
    if (probe !== null && same === null && first === null && outcome.kind === 'complete' && keeps)
      same = false;
    const want = probe === null ? 0 : probe + 1;
    const result: ReplayResult =
      run.bounded && same !== false
        ? 'bounded'
        : same === false
          ? 'restart'
          : outcome.kind === 'timeout' && outcome.items === 0
            ? 'timeout'
            : outcome.kind === 'error' && outcome.items === 0
              ? 'error'
              : first === null
                ? 'empty'
                : first <= want && outcome.kind === 'complete'
                  ? 'covered'
                  : 'partial';
    this.stats.replays[result]++;
    this.log.info('replay', { from, result, items: outcome.items, firstSeq: first, lastSeq: this.#lastSeq });
    return { same, bounded: run.bounded && same !== false };
  }

  /**
   * The live batch that started a resync, once the replay is done. No further replay from here, but one:
   * the batch shows a new process (other bytes under a used number) that the replay could not confirm (its
   * buffer never returned anything): the new process's buffer is read from 0 before the batch.
   */
  async #afterResync(trigger: SequencedPayload, sameProcess: boolean | null): Promise<void> {
    const pos = classifySeq(this.#lastSeq, trigger.seq);
    if (pos.kind === 'next' || pos.kind === 'first') this.#ingest(trigger);
    else if (pos.kind === 'gap' && sameProcess === true) {
      // The engine's buffer, read after this batch arrived, holds our last batch and nothing up to this one:
      // the engine never published it (a forged or corrupt number). Clearing for it would cost the index.
      this.stats.unconfirmed++;
      this.#drops.note('unconfirmed', 1, () => ({ seq: trigger.seq, last: this.#lastSeq }));
    } else if (pos.kind === 'gap') {
      // Still a hole before the trigger (no replay, or it did not reach that far): clear and restart here.
      this.#clearPod('gap');
      this.#ingest(trigger);
    } else if (this.#judgeBehind(trigger, sameProcess, false, true) === 'restart') {
      this.#forgetProcess('restart');
      if (this.spec.kvEventsReplay && trigger.seq > 0 && sameProcess === null) await this.#replay(false);
      const now = classifySeq(this.#lastSeq, trigger.seq);
      if (now.kind === 'next' || now.kind === 'first') this.#ingest(trigger);
    }
  }

  /** A new publisher process: its hashes and sequence numbers are not the ones we know. */
  #forgetProcess(reason: 'restart' | 'restart_signal'): void {
    this.mapper.reset();
    this.#window.reset();
    this.#lastTsSec = null;
    this.#clearPod(reason);
  }

  /**
   * Drops the pod's blocks. Until a rebuild is seen to start at the engine's first batch (seq 0), the index
   * may lack blocks the pod still holds, which vLLM announces again only when they are stored again or a
   * request reuses them with full KV reports: partialSinceMs says so to the router.
   */
  #clearPod(reason: ClearReason): void {
    this.stats.podClears[reason]++;
    this.mapper.forgetCounts();
    const now = Date.now();
    this.#enqueue([{ op: 'clear' }], this.#lastSeq ?? -1, now);
    this.#lastSeq = null;
    // Without an event stream the index holds nothing of the pod's to complete.
    if (!this.spec.kvEvents) return;
    this.#partialSinceMs = now;
    this.writer.write({ partialSinceMs: now });
  }

  #setResyncing(v: boolean): void {
    if (this.#resyncing === v) return;
    this.#resyncing = v;
    this.writer.write({ resyncing: v });
  }

  // ---- ingest ------------------------------------------------------------------------------------

  #ingest(msg: SequencedPayload): void {
    // The first batch since the clear (which reset lastSeq) decides: the engine's first, and nothing is missing.
    if (this.#lastSeq === null && msg.seq === 0 && this.#partialSinceMs > 0) {
      this.#partialSinceMs = 0;
      this.writer.write({ partialSinceMs: 0 });
    }
    this.#lastSeq = msg.seq;
    this.#window.record(msg.seq, payloadDigest(msg.payload));
    this.stats.batches++;
    const r = parseVllmBatch(msg.payload);
    if (!r.ok) {
      this.stats.decodeErrors[r.reason]++;
      const n = Object.values(this.stats.decodeErrors).reduce((a, b) => a + b, 0);
      if (n <= 10 || n % 1000 === 0)
        this.log.warn('undecodable kv event batch', { seq: msg.seq, reason: r.reason, detail: r.detail });
      return;
    }
    const b = r.batch;
    this.#lastTsSec = b.tsSec;
    this.stats.events += b.events.length;
    this.stats.unknownEvents += b.unknownEvents;
    this.stats.unknownFields += b.unknownFields;
    this.#noteDrop('unknown_event', b.unknownEvents, msg);
    this.#noteDrop('unknown_field', b.unknownFields, msg);
    for (const [k, n] of Object.entries(b.invalidEvents)) {
      this.stats.invalidEvents[k as keyof typeof b.invalidEvents] += n;
      this.#noteDrop(k as DropKind, n, msg);
    }
    if (this.spec.rank !== null && b.dataParallelRank !== null && b.dataParallelRank !== this.spec.rank) {
      this.stats.dpRankMismatches++;
      this.#drops.note('dp_rank_mismatch', 1, () => ({
        seq: msg.seq,
        rank: this.spec.rank,
        batchRank: b.dataParallelRank,
      }));
    }
    const ops = this.mapper.toOps(b.events, this.stats);
    this.#enqueue(ops, msg.seq, b.tsSec * 1000);
  }

  #noteDrop(kind: DropKind, n: number, msg: SequencedPayload): void {
    if (n <= 0) return;
    this.#drops.note(kind, n, () => {
      const d = decodeMsgpack(msg.payload);
      return { seq: msg.seq, ...(d.ok ? dropExample(d.value, kind) : {}) };
    });
  }

  #enqueue(ops: IndexOp[], seq: number, tsMs: number): void {
    this.#changedAtMs = Date.now();
    if (!this.queue.push({ seq, tsMs, ops })) this.stats.droppedBatches++;
  }
}
