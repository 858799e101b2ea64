// A stream's ingest loop: live frames → inbox → one item at a time → sequence rules → index writes.
import { classifySeq } from '../sequence.js';
import { parseLiveFrames, type SequencedPayload } from '../wire/frames.js';
import { internalError, type StreamContext } from './context.js';
import type { PodWrites } from './pod-writes.js';
import type { Resync } from './resync.js';

/** Replays run back to back for live batches dropped during a replay, before it is left to the next gap. */
export const LIVE_DROP_REPLAYS = 3;

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
 * Everything of a stream runs on one logical thread: `onFrames` (the subscriber's receive loop) and
 * `control` (lifecycle, resyncs, the handoff at start) queue items on a bounded inbox, drained one at a
 * time. Live batches wait there while a replay is in progress; an in-order batch with nothing queued takes
 * the fast path straight to the index writes.
 */
export class IngestLoop {
  #inbox: InboxItem[] = [];
  #head = 0;
  #busy = false;
  #drainDone: Promise<void> = Promise.resolve();
  /** Live batches dropped (inbox full) since the last replay that could bring them back. */
  #liveLost = 0;
  #liveLostReplays = 0;

  constructor(
    readonly cx: StreamContext,
    readonly writes: PodWrites,
    readonly resync: Resync,
  ) {}

  get length(): number {
    return this.#inbox.length - this.#head;
  }

  /** An item is being handled. */
  get busy(): boolean {
    return this.#busy;
  }

  /** Settles when the current drain has ended (after stop: when the item in hand is done). */
  drained(): Promise<void> {
    return this.#drainDone;
  }

  /** From the subscriber's receive loop: an exception here would end the stream's loop, so none leaves. */
  onFrames(frames: Buffer[]): void {
    try {
      this.#onFrame(frames);
    } catch (err) {
      internalError(this.cx, 'ingest', err);
    }
  }

  /** Queues work to run on the stream's thread, after what is queued already. */
  control(run: () => Promise<void>): void {
    this.#inbox.push({ kind: 'control', run });
    this.#kick();
  }

  #onFrame(frames: Buffer[]): void {
    const { stats, state, queue } = this.cx;
    stats.framesReceived++;
    const r = parseLiveFrames(frames);
    if (!r.ok) {
      stats.malformedFrames++;
      if (stats.malformedFrames <= 10) this.cx.log.warn('malformed kv event frame', { detail: r.detail });
      return;
    }
    if (state.stopped) return;
    if (queue.suspended) {
      stats.liveDropped++; // the recovery replay brings them back
      return;
    }
    if (this.length >= this.cx.settings.liveBufferBatches) {
      stats.liveDropped++;
      this.#liveLost++; // replayed once the inbox has drained (#repairLiveLoss)
      return;
    }
    // A live batch answers what the connection replay asks (did anything happen while we were away?): if
    // the ROUTER has not begun to answer, stop waiting for it. A slow or absent ROUTER must not hold back
    // the stream, and this batch is classified like any other.
    const run = state.replayRun;
    if (run !== null && run.liveCancels && run.items === 0) run.cancel();
    // Fast path: nothing queued, in order — no promise, no inbox.
    if (!this.#busy && this.length === 0 && state.lastSeq !== null && r.msg.seq === state.lastSeq + 1) {
      this.writes.apply(r.msg);
      return;
    }
    this.#inbox.push({ kind: 'live', msg: r.msg, overlap: state.replayRun !== null });
    this.#kick();
  }

  #kick(): void {
    if (!this.#busy) this.#drainDone = this.#drain();
  }

  async #drain(): Promise<void> {
    this.#busy = true;
    try {
      while (!this.cx.state.stopped) {
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
          internalError(this.cx, 'ingest', err);
        }
      }
    } finally {
      this.#inbox = this.#inbox.slice(this.#head);
      this.#head = 0;
      this.#busy = false;
      if (this.#inbox.length > 0 && !this.cx.state.stopped) this.#kick();
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
    if (!this.cx.spec.kvEventsReplay || this.cx.queue.suspended) return false;
    if (this.#liveLostReplays >= LIVE_DROP_REPLAYS) {
      this.cx.log.warn(
        'live batches keep overflowing live_buffer_batches during replays: the next sequence gap replays them',
        { dropped, replays: this.#liveLostReplays },
      );
      this.#liveLostReplays = 0;
      return false;
    }
    this.#liveLostReplays++;
    this.cx.stats.liveDropReplays++;
    this.cx.log.warn(
      'live batches were dropped while a replay ran (live_buffer_batches full): replaying them',
      { dropped, after: this.cx.state.lastSeq, attempt: this.#liveLostReplays },
    );
    this.#inbox.push({ kind: 'control', run: async () => this.resync.request('live_dropped', null) });
    return true;
  }

  /** A live batch, in inbox order: the sequence rules (sequence.ts) say ingest, resync, or drop. */
  #onLive(item: LiveItem): Promise<void> | undefined {
    const { msg } = item;
    const { state, stats } = this.cx;
    const pos = classifySeq(state.lastSeq, msg.seq);
    switch (pos.kind) {
      case 'next':
        this.writes.apply(msg);
        return undefined;
      case 'first':
        if (msg.seq === 0) {
          this.writes.apply(msg);
          return undefined;
        }
        return this.resync.request('first', msg);
      case 'gap':
        stats.gaps++;
        stats.missingBatches += pos.missing;
        if (stats.gaps <= 10 || stats.gaps % 1000 === 0)
          this.cx.log.warn('sequence gap', { expected: pos.expected, got: msg.seq, gaps: stats.gaps });
        return this.resync.request('gap', msg);
      case 'behind': {
        const v = this.resync.judgeBehind(msg, null, this.cx.spec.kvEventsReplay !== undefined, item.overlap);
        if (v === 'restart') return this.resync.request('restart', msg);
        if (v === 'ask') return this.resync.request('check', msg);
        return undefined;
      }
    }
  }
}
