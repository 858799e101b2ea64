// A stream's hand-off between collectors: taken at start, checkpointed while quiet, saved at a clean stop.
import { LeaseLostError, type HandoffTake } from '../../index/index.js';
import {
  HANDOFF_VERSION,
  decodeHandoff,
  encodeHandoff,
  handoffMismatch,
  type StreamHandoff,
} from '../handoff.js';
import type { StreamContext } from './context.js';
import type { PodWrites } from './pod-writes.js';

/**
 * The stream's side of handoff.ts (docs/collector.md, "Handoff at a clean stop"). `take` runs first of all
 * at start (the stream's inbox holds live batches meanwhile); `checkpoint` runs from the worker's timer with
 * the stream idle; `saveAfterStop` after stop(). A lost writer lease goes to the owner, uncounted.
 */
export class HandoffStep {
  /** The last batch a checkpoint was taken at (saved or refused), and one in flight. */
  #checkpointSeq: number | null = null;
  #checkpointing = false;

  constructor(
    readonly cx: StreamContext,
    readonly writes: PodWrites,
  ) {}

  /** At start: go on from the previous collector's handoff if it still describes the index, else clear. */
  async take(): Promise<void> {
    let take: HandoffTake;
    try {
      take = await this.cx.index.takeHandoff(this.cx.pod);
    } catch (err) {
      if (err instanceof LeaseLostError) return this.cx.owner.leaseLost(err);
      this.cx.stats.handoffTakes.error++;
      this.cx.log.warn("the previous collector's handoff could not be read: clearing the pod", { err });
      return this.writes.clear('start');
    }
    if (this.cx.state.stopped) return;
    const h = this.#usable(take);
    if (h === null) return this.writes.clear('start');
    this.#resume(h);
  }

  /**
   * With the stream idle and its writes all confirmed: a handoff of the stream as it stands, once it has
   * been quiet handoffCheckpointMs since it last changed. It is saved off the stream's path; a write landing
   * meanwhile makes the index refuse it, and the next quiet spell takes another.
   */
  checkpoint(now: number): void {
    const every = this.cx.settings.handoffCheckpointMs ?? 0;
    const { state } = this.cx;
    if (!this.cx.settings.handoff || every <= 0 || this.#checkpointing) return;
    if (state.lastSeq === null || state.lastSeq === this.#checkpointSeq || now - state.changedAtMs < every)
      return;
    const h = this.#handoffNow(now);
    if (h === null) return;
    this.#checkpointing = true;
    this.#checkpointSeq = h.lastSeq;
    void this.#save(h, 'checkpointed').then((r) => {
      this.#checkpointing = false;
      if (r.err === undefined) return;
      this.#checkpointSeq = null; // try again after the next quiet spell
      state.changedAtMs = now;
      this.cx.log.debug('handoff checkpoint not saved', { err: r.err });
    });
  }

  /**
   * After stop(): leaves what the next collector needs to go on from here, unless `clean` is false (writes
   * left or lost, a resync cut short), there is nothing to go on from (nothing ingested since the last
   * clear), or `deadlineMs` (shutdown_timeout_ms) has passed. Counts and logs the outcome; never throws.
   */
  async saveAfterStop(deadlineMs: number, clean: boolean): Promise<void> {
    const { stats, log } = this.cx;
    if (!this.cx.spec.kvEvents) return;
    if (this.cx.now() > deadlineMs) {
      stats.handoffSaves.timeout++;
      log.warn('no handoff for the next collector: shutdown_timeout_ms is spent; it will clear the pod');
      return;
    }
    const h = clean ? this.#handoffNow(this.cx.now()) : null;
    if (h === null) {
      stats.handoffSaves.not_ready++;
      log.info(
        'no handoff for the next collector (writes left unflushed or lost, or nothing applied since a clear): it will clear the pod',
      );
      return;
    }
    const r = await this.#save(h, 'saved');
    if (r.saved)
      log.info('handoff saved for the next collector', {
        lastSeq: h.lastSeq,
        blocks: h.mapper.entries.length,
      });
    else if (r.err !== undefined)
      log.warn('handoff not saved: the next collector will clear the pod', { err: r.err });
  }

  /**
   * Saves a handoff and counts it: as `kind` if stored, not_ready if the index refused it (the pod is unknown
   * to it, or was written after the handoff was taken), failed with the error otherwise. A lost lease goes to
   * the owner, uncounted.
   */
  async #save(h: StreamHandoff, kind: 'saved' | 'checkpointed'): Promise<{ saved: boolean; err?: unknown }> {
    try {
      const saved = await this.cx.index.saveHandoff(this.cx.pod, encodeHandoff(h));
      this.cx.stats.handoffSaves[saved ? kind : 'not_ready']++;
      return { saved };
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.cx.owner.leaseLost(err);
        return { saved: false };
      }
      this.cx.stats.handoffSaves.failed++;
      return { saved: false, err };
    }
  }

  #handoffNow(nowMs: number): StreamHandoff | null {
    const { spec, state, pod } = this.cx;
    if (!spec.kvEvents || state.lastSeq === null) return null;
    return {
      v: HANDOFF_VERSION,
      model: pod.model,
      podId: pod.podId,
      endpoint: spec.kvEvents,
      topic: spec.topic,
      blockSize: this.cx.settings.blockSize,
      lastSeq: state.lastSeq,
      lastTsSec: state.lastTsSec,
      window: state.window.entries(),
      bufferKeeps: state.bufferKeeps,
      partialSinceMs: state.partialSinceMs,
      processStartSec: this.cx.owner.processStartSec(),
      mapper: this.cx.mapper.snapshot(),
      savedAtMs: nowMs,
    };
  }

  #usable(take: HandoffTake): StreamHandoff | null {
    const { stats, log } = this.cx;
    if (take.kind === 'none') {
      stats.handoffTakes.none++;
      return null;
    }
    if (take.kind === 'stale') {
      stats.handoffTakes.stale++;
      log.info("the previous collector's handoff is stale (the pod was written since): clearing the pod");
      return null;
    }
    const d = decodeHandoff(take.record);
    if (!d.ok) {
      stats.handoffTakes.invalid++;
      log.warn("the previous collector's handoff is unusable: clearing the pod", { detail: d.detail });
      return null;
    }
    const why = handoffMismatch(d.handoff, {
      model: this.cx.pod.model,
      podId: this.cx.pod.podId,
      endpoint: this.cx.spec.kvEvents ?? '',
      topic: this.cx.spec.topic,
      blockSize: this.cx.settings.blockSize,
    });
    if (why !== null) {
      stats.handoffTakes.mismatch++;
      log.info("the previous collector's handoff is for another stream: clearing the pod", { why });
      return null;
    }
    return d.handoff;
  }

  /**
   * Takes the previous collector's place: its hashes, its last batch and the digests before it. The replay
   * at connection then asks from that batch, which tells a continuation from a gap or an engine restart.
   */
  #resume(h: StreamHandoff): void {
    const { state } = this.cx;
    const ops = this.cx.mapper.restore(h.mapper, this.cx.stats);
    if (ops.length > 0) this.writes.enqueue(ops, -1, this.cx.now()); // a smaller block_map_max_entries than before
    state.window.restore(h.window);
    state.lastSeq = h.lastSeq;
    state.lastTsSec = h.lastTsSec;
    state.bufferKeeps = h.bufferKeeps;
    state.partialSinceMs = h.partialSinceMs;
    this.cx.writer.write({ partialSinceMs: h.partialSinceMs });
    this.cx.stats.handoffTakes.resumed++;
    this.cx.log.info("resumed from the previous collector's handoff: the pod is not cleared", {
      lastSeq: h.lastSeq,
      blocks: h.mapper.entries.length,
      savedAgoMs: this.cx.now() - h.savedAtMs,
    });
    this.cx.owner.resumed(h.processStartSec);
  }
}
