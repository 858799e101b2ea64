// What a stream writes for its pod: a batch decoded into index ops, a clear, the resyncing flag.
import type { IndexOp } from '../../index/index.js';
import { payloadDigest } from '../sequence.js';
import { dropExample, type ClearReason, type DropKind } from '../stream-stats.js';
import type { SequencedPayload } from '../wire/frames.js';
import { decodeMsgpack } from '../wire/msgpack.js';
import { parseVllmBatch } from '../wire/vllm-events.js';
import type { StreamContext } from './context.js';

/**
 * The bottom of a stream: every part that applies a batch, clears the pod or marks it resyncing does so
 * here, so the shared state (lastSeq, the applied window, partialSinceMs) moves in one place. `apply` takes
 * a batch that the sequence rules already accepted.
 */
export class PodWrites {
  constructor(readonly cx: StreamContext) {}

  /** Records the batch as the last applied, decodes it, and queues its ops for the index. */
  apply(msg: SequencedPayload): void {
    const { state, stats, spec } = this.cx;
    // The first batch since the clear (which reset lastSeq) decides: the engine's first, and nothing is missing.
    if (state.lastSeq === null && msg.seq === 0 && state.partialSinceMs > 0) {
      state.partialSinceMs = 0;
      this.cx.writer.write({ partialSinceMs: 0 });
    }
    state.lastSeq = msg.seq;
    state.window.record(msg.seq, payloadDigest(msg.payload));
    stats.batches++;
    const r = parseVllmBatch(msg.payload);
    if (!r.ok) {
      stats.decodeErrors[r.reason]++;
      const n = Object.values(stats.decodeErrors).reduce((a, b) => a + b, 0);
      if (n <= 10 || n % 1000 === 0)
        this.cx.log.warn('undecodable kv event batch', { seq: msg.seq, reason: r.reason, detail: r.detail });
      return;
    }
    const b = r.batch;
    state.lastTsSec = b.tsSec;
    stats.events += b.events.length;
    stats.unknownEvents += b.unknownEvents;
    stats.unknownFields += b.unknownFields;
    this.#noteDrop('unknown_event', b.unknownEvents, msg);
    this.#noteDrop('unknown_field', b.unknownFields, msg);
    for (const [k, n] of Object.entries(b.invalidEvents)) {
      stats.invalidEvents[k as keyof typeof b.invalidEvents] += n;
      this.#noteDrop(k as DropKind, n, msg);
    }
    if (spec.rank !== null && b.dataParallelRank !== null && b.dataParallelRank !== spec.rank) {
      stats.dpRankMismatches++;
      this.cx.drops.note('dp_rank_mismatch', 1, () => ({
        seq: msg.seq,
        rank: spec.rank,
        batchRank: b.dataParallelRank,
      }));
    }
    const ops = this.cx.mapper.toOps(b.events, stats);
    this.enqueue(ops, msg.seq, b.tsSec * 1000);
  }

  /**
   * Drops the pod's blocks. Until a rebuild is seen to start at the engine's first batch (seq 0), the index
   * may lack blocks the pod still holds, which vLLM announces again only when they are stored again or a
   * request reuses them with full KV reports: partialSinceMs says so to the router.
   */
  clear(reason: ClearReason): void {
    const { state } = this.cx;
    this.cx.stats.podClears[reason]++;
    this.cx.mapper.forgetCounts();
    const now = this.cx.now();
    this.enqueue([{ op: 'clear' }], state.lastSeq ?? -1, now);
    state.lastSeq = null;
    // Without an event stream the index holds nothing of the pod's to complete.
    if (!this.cx.spec.kvEvents) return;
    state.partialSinceMs = now;
    this.cx.writer.write({ partialSinceMs: now });
  }

  enqueue(ops: IndexOp[], seq: number, tsMs: number): void {
    this.cx.state.changedAtMs = this.cx.now();
    if (!this.cx.queue.push({ seq, tsMs, ops })) this.cx.stats.droppedBatches++;
  }

  setResyncing(v: boolean): void {
    if (this.cx.state.resyncing === v) return;
    this.cx.state.resyncing = v;
    this.cx.writer.write({ resyncing: v });
  }

  #noteDrop(kind: DropKind, n: number, msg: SequencedPayload): void {
    if (n <= 0) return;
    this.cx.drops.note(kind, n, () => {
      const d = decodeMsgpack(msg.payload);
      return { seq: msg.seq, ...(d.ok ? dropExample(d.value, kind) : {}) };
    });
  }
}
