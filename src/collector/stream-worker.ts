import type { IndexOp, KvIndex, PodRef } from '../index/kv-index.js';
import { KeyMapper } from './key-mapper.js';
import type { Logger } from './logger.js';
import { ApplyQueue, type ApplyQueueOptions, type QueuedBatch } from './ops/apply-queue.js';
import { PodStateWriter, type PodStatePatch } from './ops/pod-state-writer.js';
import type { StreamSpec } from './pods.js';
import { classifySeq } from './sequence.js';
import { newStreamStats, type ClearReason, type StreamStats } from './stream-stats.js';
import { requestReplay, type ReplayOutcome } from './transport/replay-client.js';
import { EventSubscriber } from './transport/subscriber.js';
import { parseLiveFrames, type SequencedPayload } from './wire/frames.js';
import { parseVllmBatch } from './wire/vllm-events.js';

export interface StreamSettings {
  /** The router's block size for this model. */
  blockSize: number;
  blockMapMaxEntries: number;
  replayTimeoutMs: number;
  /** Live batches held while a replay runs; beyond it they are dropped (a later gap repairs that). */
  liveBufferBatches: number;
  receiveHighWaterMark: number;
  queue: ApplyQueueOptions;
}

export interface StreamObserver {
  applied(worker: StreamWorker, batches: readonly QueuedBatch[], appliedAtMs: number, applyMs: number): void;
}

interface LiveItem {
  kind: 'live';
  msg: SequencedPayload;
  /** Arrived while a replay ran: an old sequence number is then overlap, not a restart. */
  maybeDuplicate: boolean;
}
interface ControlItem {
  kind: 'control';
  run: () => Promise<void>;
}
type InboxItem = LiveItem | ControlItem;

type ResyncKind = 'first' | 'gap' | 'restart' | 'recovery' | 'restart_signal';

/**
 * One pod's (one DP rank's) KV-event stream, end to end: ZMQ SUB → sequence check → decode → our keys →
 * ordered, batched index writes. Sequence rules (research/vllm.md §2):
 * - the next number: ingest;
 * - a jump: replay the missing range from the pod's ROUTER; if replay is absent or cannot cover it, clear
 *   the pod (epoch) and rebuild from new events — after a clear any contiguous run is consistent;
 * - a step back: the engine restarted: forget its hashes, clear, replay its (new) buffer from 0.
 * The pod is also cleared when the stream starts (what the index holds may predate a restart we missed),
 * then rebuilt from the replay buffer. Everything runs on one logical thread per stream: live batches wait
 * in a bounded inbox while a replay is in progress.
 */
export class StreamWorker {
  readonly stats: StreamStats = newStreamStats();
  readonly pod: PodRef;
  readonly mapper: KeyMapper;
  readonly queue: ApplyQueue;
  readonly writer: PodStateWriter;
  #sub: EventSubscriber | null = null;
  #inbox: InboxItem[] = [];
  #head = 0;
  #busy = false;
  #resyncing = false;
  #stopped = false;
  #lastSeq: number | null = null;
  #drainDone: Promise<void> = Promise.resolve();

  constructor(
    readonly spec: StreamSpec,
    readonly settings: StreamSettings,
    readonly index: KvIndex,
    readonly log: Logger,
    readonly observer: StreamObserver,
  ) {
    this.pod = { model: spec.model, podId: spec.podId };
    this.mapper = new KeyMapper(spec.model, settings.blockSize, settings.blockMapMaxEntries);
    this.writer = new PodStateWriter(index, this.pod, (err) => {
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
        this.observer.applied(this, batches, appliedAtMs, applyMs);
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
      recovered: () => {
        this.log.info('index reachable again: clearing and rebuilding pod');
        this.writer.write({ address: this.spec.address, resyncing: true });
        this.#control(() => this.#resync('recovery', null));
      },
      probe: () => index.upsertPodState(this.pod, { resyncing: true }),
    });
  }

  get lastSeq(): number | null {
    return this.#lastSeq;
  }

  get resyncing(): boolean {
    return this.#resyncing;
  }

  get inboxLength(): number {
    return this.#inbox.length - this.#head;
  }

  start(initial: PodStatePatch): void {
    this.writer.write({ ...initial, address: this.spec.address, resyncing: true });
    this.#resyncing = true;
    this.#clearPod('start');
    if (this.spec.kvEvents) {
      this.#sub = new EventSubscriber({
        endpoint: this.spec.kvEvents,
        topic: this.spec.topic,
        receiveHighWaterMark: this.settings.receiveHighWaterMark,
        onMessage: (frames) => this.#onFrames(frames),
        onConnection: (event, address) => {
          this.log.info(`kv events ${event}`, { address });
          // Batches published while we were not (yet) subscribed are lost to the SUB socket, and nothing
          // reveals the gap until the pod publishes again, which an idle pod may not do for a long time:
          // on every (re)connection, ask the replay buffer for what came after the last batch we have.
          if (event === 'connect' && this.spec.kvEventsReplay)
            this.#control(() => this.#resync('first', null));
        },
        onError: (err) => this.log.error('kv event subscriber failed', { err }),
      });
      this.#sub.start();
    }
    // Replay on connect: rebuild from whatever the pod's buffer still holds.
    this.#control(() => this.#resync('first', null));
  }

  /** The pod's process start time changed (seen in /metrics): treat it as a restart. */
  restartSignal(): void {
    this.#control(() => this.#resync('restart_signal', null));
  }

  /** Stops receiving; waits up to `flushTimeoutMs` for queued writes. Returns false if writes were left. */
  async stop(flushTimeoutMs: number): Promise<boolean> {
    this.#stopped = true;
    await this.#sub?.close();
    await this.#drainDone;
    const deadline = new Promise<false>((r) => setTimeout(() => r(false), flushTimeoutMs).unref());
    const flushed = await Promise.race([this.queue.drained().then(() => true as const), deadline]);
    await Promise.race([this.writer.settled(), deadline]);
    // Nothing of this stream may land after stop() returns (a removed pod must stay removed); writes in
    // flight are bounded by the index's command timeout.
    await this.queue.close();
    await this.writer.close();
    return flushed;
  }

  // ---- inbox -------------------------------------------------------------------------------------

  #onFrames(frames: Buffer[]): void {
    this.stats.framesReceived++;
    const r = parseLiveFrames(frames);
    if (!r.ok) {
      this.stats.malformedFrames++;
      if (this.stats.malformedFrames <= 10) this.log.warn('malformed kv event frame', { detail: r.detail });
      return;
    }
    if (this.#stopped) return;
    if (this.queue.suspended || this.inboxLength >= this.settings.liveBufferBatches) {
      this.stats.liveDropped++;
      return;
    }
    // Fast path: nothing queued, in order — no promise, no inbox.
    if (!this.#busy && this.inboxLength === 0 && this.#lastSeq !== null && r.msg.seq === this.#lastSeq + 1) {
      this.#ingest(r.msg);
      return;
    }
    this.#inbox.push({ kind: 'live', msg: r.msg, maybeDuplicate: this.#resyncing });
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
      while (this.#head < this.#inbox.length && !this.#stopped) {
        const item = this.#inbox[this.#head]!;
        this.#inbox[this.#head++] = undefined as unknown as InboxItem;
        if (item.kind === 'control') await item.run();
        else {
          const p = this.#onLive(item);
          if (p) await p;
        }
      }
    } catch (err) {
      this.log.error('stream worker failed on a batch', { err });
    } finally {
      this.#inbox = this.#inbox.slice(this.#head);
      this.#head = 0;
      this.#busy = false;
      if (this.#inbox.length > 0 && !this.#stopped) this.#kick();
    }
  }

  #onLive(item: LiveItem): Promise<void> | undefined {
    const { msg } = item;
    const v = classifySeq(this.#lastSeq, msg.seq, item.maybeDuplicate);
    switch (v.kind) {
      case 'next':
        this.#ingest(msg);
        return undefined;
      case 'duplicate':
        this.stats.duplicates++;
        return undefined;
      case 'first':
        if (msg.seq === 0) {
          this.#ingest(msg);
          return undefined;
        }
        return this.#resync('first', msg);
      case 'gap':
        this.stats.gaps++;
        this.stats.missingBatches += v.missing;
        this.log.warn('sequence gap', { expected: v.expected, got: msg.seq });
        return this.#resync('gap', msg);
      case 'restart':
        this.stats.restarts++;
        this.log.warn('sequence went backwards: engine restarted', { last: this.#lastSeq, got: msg.seq });
        return this.#resync('restart', msg);
    }
  }

  // ---- resync ------------------------------------------------------------------------------------

  async #resync(kind: ResyncKind, trigger: SequencedPayload | null): Promise<void> {
    if (kind === 'restart' || kind === 'restart_signal') {
      this.mapper.reset();
      this.#clearPod(kind);
    } else if (kind === 'recovery') this.#clearPod('recovery');
    // Now either fresh (lastSeq null: nothing ingested since the last clear) or a gap after lastSeq.
    if (!(this.#lastSeq === null && trigger?.seq === 0) && this.spec.kvEventsReplay) {
      this.#setResyncing(true);
      await this.#replay(this.#lastSeq === null ? 0 : this.#lastSeq + 1);
    }
    if (trigger !== null) this.#afterResync(trigger);
    this.#setResyncing(false);
  }

  async #replay(from: number): Promise<void> {
    let first: number | null = null;
    const outcome: ReplayOutcome = await requestReplay(
      this.spec.kvEventsReplay!,
      from,
      this.settings.replayTimeoutMs,
      (m) => {
        if (this.#stopped) return false;
        first ??= m.seq;
        this.stats.replayedBatches++;
        if (this.#lastSeq !== null && m.seq <= this.#lastSeq) {
          this.stats.duplicates++;
        } else if (this.#lastSeq === null || m.seq === this.#lastSeq + 1) {
          this.#ingest(m);
        } else {
          // The buffer no longer holds what we miss: clear, and start a fresh contiguous run here.
          this.#clearPod('gap');
          this.#ingest(m);
        }
        // A replay is a burst: let the index catch up rather than overflow the write queue.
        const room = this.settings.queue.maxQueuedOps / 2;
        return this.queue.queuedOps > room ? this.queue.waitForRoom(room).then(() => !this.#stopped) : true;
      },
    );
    const result =
      outcome.kind === 'timeout' && outcome.items === 0
        ? 'timeout'
        : outcome.kind === 'error' && outcome.items === 0
          ? 'error'
          : first === null
            ? 'empty'
            : first === from && outcome.kind === 'complete'
              ? 'covered'
              : 'partial';
    this.stats.replays[result]++;
    this.log.info('replay', { from, result, items: outcome.items, firstSeq: first, lastSeq: this.#lastSeq });
  }

  #afterResync(trigger: SequencedPayload): void {
    const v = classifySeq(this.#lastSeq, trigger.seq, true);
    if (v.kind === 'duplicate') this.stats.duplicates++;
    else if (v.kind === 'next' || v.kind === 'first') this.#ingest(trigger);
    else {
      // Still a hole before the trigger (no replay, or it did not reach that far): clear and restart here.
      this.#clearPod('gap');
      this.#ingest(trigger);
    }
  }

  #clearPod(reason: ClearReason): void {
    this.stats.podClears[reason]++;
    this.mapper.forgetCounts();
    this.#enqueue([{ op: 'clear' }], this.#lastSeq ?? -1, Date.now());
    this.#lastSeq = null;
  }

  #setResyncing(v: boolean): void {
    if (this.#resyncing === v) return;
    this.#resyncing = v;
    this.writer.write({ resyncing: v });
  }

  // ---- ingest ------------------------------------------------------------------------------------

  #ingest(msg: SequencedPayload): void {
    this.#lastSeq = msg.seq;
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
    this.stats.events += b.events.length;
    this.stats.unknownEvents += b.unknownEvents;
    this.stats.unknownFields += b.unknownFields;
    for (const [k, n] of Object.entries(b.invalidEvents))
      this.stats.invalidEvents[k as keyof typeof b.invalidEvents] += n;
    if (this.spec.rank !== null && b.dataParallelRank !== null && b.dataParallelRank !== this.spec.rank)
      this.stats.dpRankMismatches++;
    const ops = this.mapper.toOps(b.events, this.stats);
    this.#enqueue(ops, msg.seq, b.tsSec * 1000);
  }

  #enqueue(ops: IndexOp[], seq: number, tsMs: number): void {
    if (!this.queue.push({ seq, tsMs, ops })) this.stats.droppedBatches++;
  }
}
