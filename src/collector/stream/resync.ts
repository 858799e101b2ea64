// A stream's resync: judge a batch at or below the last, replay from the pod's buffer, clear on a restart.
import { DEFAULT_REPLAY_LIMITS, ReplayControl, type ReplayLimits } from '../replay-control.js';
import { classifyBehind, classifySeq, payloadDigest, type BehindVerdict } from '../sequence.js';
import type { ReplayResult } from '../stream-stats.js';
import { requestReplay } from '../transport/replay-client.js';
import type { SequencedPayload } from '../wire/frames.js';
import { parseVllmBatch } from '../wire/vllm-events.js';
import type { StreamContext } from './context.js';
import type { PodWrites } from './pod-writes.js';
import { ReplayRun } from './replay-run.js';

/**
 * Why a replay runs. connect: the SUB socket (re)connected; check: a batch went backwards and the replay
 * buffer decides what it is; live_dropped: live batches overflowed the inbox during a replay.
 */
export type ResyncKind =
  'first' | 'connect' | 'gap' | 'restart' | 'check' | 'recovery' | 'restart_signal' | 'live_dropped';

/**
 * Two resyncs held back as one (replay-control.ts): a process restart seen in /metrics forgets the process
 * and clears, which also does a recovery's clear; a recovery clears; any other replays from the last batch.
 */
export function mergeResync(a: ResyncKind, b: ResyncKind): ResyncKind {
  for (const k of ['restart_signal', 'recovery'] as const) if (a === k || b === k) return k;
  return a === 'connect' && b === 'connect' ? 'connect' : 'check';
}

/**
 * Brings the index back in line with the pod (docs/collector.md, "Sequence numbers" and "Replay control"):
 * `request` is the one entry for a resync of any kind, `judgeBehind` the verdict on a batch numbered at or
 * below the last one applied. Runs on the stream's inbox: `control` queues work there (a held-back replay
 * when its time comes).
 */
/** Replays in a row that may time out before any reply before a batch is judged without one. */
export const UNANSWERED_RETRIES = 2;

export class Resync {
  readonly #replays: ReplayControl<ResyncKind>;
  readonly #limits: ReplayLimits;
  /**
   * The first live batch whose resync was held back: the held resync handles it as its own trigger, so that
   * a replay that fails (no ROUTER, a timeout) still leaves it to the sequence rules. Later ones are dropped:
   * the replay brings them back.
   */
  #heldTrigger: SequencedPayload | null = null;
  /** Replays in a row that timed out before any reply (reset by one that answers). */
  #unansweredInARow = 0;

  constructor(
    readonly cx: StreamContext,
    readonly writes: PodWrites,
    control: (run: () => Promise<void>) => void,
  ) {
    this.#limits = cx.settings.replayLimits ?? DEFAULT_REPLAY_LIMITS;
    this.#replays = new ReplayControl<ResyncKind>(
      cx.stats.replayControl,
      (kind) =>
        control(() => {
          const trigger = this.#heldTrigger;
          this.#heldTrigger = null;
          return this.#run(kind, trigger);
        }),
      mergeResync,
      this.#limits,
      cx.now,
    );
  }

  /**
   * A resync that would replay goes through replay control (replay-control.ts): it runs now, or is held back
   * as the one pending resync, which then replays from the last batch applied. Held back, its trigger is
   * dropped: the engine's replay buffer holds it if the engine published it. One that needs no replay (no
   * replay endpoint, or a fresh stream meeting the engine's seq 0) runs at once.
   */
  request(kind: ResyncKind, trigger: SequencedPayload | null): Promise<void> | undefined {
    const { state, spec } = this.cx;
    const replays = spec.kvEventsReplay !== undefined && !(state.lastSeq === null && trigger?.seq === 0);
    if (!replays || state.stopped) return this.#run(kind, trigger);
    const d = this.#replays.request(kind, this.cx.now());
    if (d === 'run') return this.#run(kind, trigger);
    if (d !== 'coalesced')
      this.cx.log.info('replay held back', { kind, reason: d, after: state.lastSeq, trigger: trigger?.seq });
    this.#heldTrigger ??= trigger;
    // Until the pending resync has run, the index may lag the pod.
    this.writes.setResyncing(true);
    return undefined;
  }

  /**
   * A batch numbered at or below the last one applied (sequence.ts classifyBehind): counts and logs a
   * duplicate, an out-of-order batch or a restart, and returns the verdict; the caller acts on it. A
   * duplicate that a replay brought (`overlap`) is expected, and only counted.
   */
  judgeBehind(
    msg: SequencedPayload,
    sameProcess: boolean | null,
    canAsk: boolean,
    overlap: boolean,
  ): BehindVerdict {
    const { state, stats, drops } = this.cx;
    const applied = state.window.lookup(msg.seq, payloadDigest(msg.payload));
    const newer = applied === 'unknown' && sameProcess === null && !canAsk ? this.#isNewer(msg) : null;
    const v = classifyBehind({ applied, sameProcess, canAsk, newer });
    const last = state.lastSeq;
    if (v === 'duplicate') {
      stats.duplicates++;
      if (!overlap) drops.note('duplicate', 1, () => ({ seq: msg.seq, last }));
    } else if (v === 'out_of_order') {
      stats.outOfOrder++;
      drops.note('out_of_order', 1, () => ({
        seq: msg.seq,
        last,
        evidence:
          sameProcess === true
            ? 'the replay buffer still holds the last batch applied'
            : 'published no later than the last batch applied',
      }));
    } else if (v === 'restart') {
      stats.restarts++;
      state.streamRestartAtMs = this.cx.now();
      this.cx.log.warn('sequence went backwards with new content: engine restarted', {
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

  /** At stop: cuts the replay in progress short and forgets the one held back. */
  stop(): void {
    this.cx.state.replayRun?.cancel();
    this.#replays.stop();
    this.#heldTrigger = null;
  }

  /** Whether the batch's publisher timestamp is later than the last applied one's (null: cannot tell). */
  #isNewer(msg: SequencedPayload): boolean | null {
    const last = this.cx.state.lastTsSec;
    if (last === null) return null;
    const r = parseVllmBatch(msg.payload);
    return r.ok ? r.batch.tsSec > last : null;
  }

  async #run(kind: ResyncKind, trigger: SequencedPayload | null): Promise<void> {
    const { state, stats } = this.cx;
    if (kind === 'restart' || kind === 'restart_signal') {
      this.#forgetProcess(kind);
      // The clear of a recovery waiting behind this one is done: the pod is rebuilt from here.
      state.recoveryPending = false;
    } else if (kind === 'recovery') {
      state.recoveryPending = false;
      this.writes.clear('recovery');
    }
    let sameProcess: boolean | null = null;
    // The last replay read the buffer to its end (not cut short by a timeout, e.g. at a refused frame).
    let complete = false;
    // Now either fresh (lastSeq null: nothing ingested since the last clear) or after lastSeq. Fresh, a
    // live seq 0 needs nothing older.
    if (this.cx.spec.kvEventsReplay && !(state.lastSeq === null && trigger?.seq === 0)) {
      this.writes.setResyncing(true);
      const first = await this.#replay(kind === 'connect');
      sameProcess = first.same;
      complete = first.complete;
      let bounded = first.bounded;
      let cutShort = first.cutShort;
      let unanswered = first.unanswered;
      if (sameProcess === false && !state.stopped) {
        stats.restarts++;
        state.streamRestartAtMs = this.cx.now();
        this.cx.log.warn('engine restarted: its replay buffer no longer holds the last batch applied', {
          last: state.lastSeq,
        });
        this.#forgetProcess('restart');
        sameProcess = null; // a fact about the old process
        const again = await this.#replay(false);
        bounded = again.bounded;
        complete = again.complete;
        cutShort = again.cutShort;
        unanswered = again.unanswered;
      }
      this.#unansweredInARow = unanswered ? this.#unansweredInARow + 1 : 0;
      // A replay that timed out before any reply, with a batch waiting on its verdict: no proof of a hole
      // or a restart either (a ROUTER starved on a loaded host). It is asked again, one replay_timeout_ms
      // later, up to UNANSWERED_RETRIES times in a row, before the batch is judged without it (which clears
      // the pod).
      const retry = unanswered && trigger !== null && this.#unansweredInARow <= UNANSWERED_RETRIES;
      if ((bounded || cutShort || retry) && !state.stopped) {
        // The rest of the buffer comes with the next replay, which also takes the trigger. A replay cut short
        // (a timeout on a loaded host) after it applied batches is no proof of a hole: the next one goes on
        // from there. One that applied nothing before it stopped (a frame ZMQ refused) leaves the hole to
        // #afterResync.
        this.#heldTrigger ??= trigger;
        this.#replays.bounded(
          'check',
          this.cx.now(),
          bounded ? 'bounded' : cutShort ? 'cut_short' : 'unanswered',
          // Unanswered, the ROUTER may still be sending an abandoned reply (vLLM's replay thread sends its
          // whole buffer to a peer that left): asked again at once, this one would wait behind it too.
          bounded || cutShort ? 0 : this.cx.settings.replayTimeoutMs,
        );
        this.writes.setResyncing(true);
        return;
      }
    }
    if (trigger !== null && !state.stopped) await this.#afterResync(trigger, sameProcess, complete);
    // The index may have lost this pod's writes meanwhile (dropped queue, suspended writes): what was just
    // replayed is gone, and the pod stays resyncing until the recovery ahead has rebuilt it.
    this.writes.setResyncing(this.cx.queue.suspended || state.recoveryPending);
  }

  /**
   * Replays the pod's buffer after the last batch applied (from 0 when none). It asks from that last batch
   * itself: still there with the same bytes, the publisher is the process we follow (returns true); other
   * bytes there, or nothing at or after it from a buffer that keeps batches, it is a new process (returns
   * false, having applied nothing). Returns null when it cannot tell.
   */
  async #replay(liveCancels: boolean): Promise<{
    same: boolean | null;
    bounded: boolean;
    complete: boolean;
    cutShort: boolean;
    unanswered: boolean;
  }> {
    const { state, stats, settings, queue } = this.cx;
    const probe = state.lastSeq;
    const from = probe ?? 0;
    const keeps = state.bufferKeeps;
    const run = new ReplayRun(liveCancels);
    state.replayRun = run;
    let first: number | null = null;
    let same: boolean | null = null;
    const request = requestReplay(
      this.cx.spec.kvEventsReplay!,
      from,
      settings.replayTimeoutMs,
      (m) => {
        if (state.stopped || run.cancelled) return false;
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
        stats.replayedBatches++;
        state.bufferKeeps = true;
        if (probe !== null && m.seq === probe && same === null) {
          const known = state.window.lookup(m.seq, payloadDigest(m.payload));
          if (known === 'different') {
            same = false;
            return false;
          }
          if (known === 'same') same = true;
          return true; // our last batch: already applied
        }
        if (state.lastSeq !== null && m.seq <= state.lastSeq) {
          stats.duplicates++;
        } else if (state.lastSeq === null || m.seq === state.lastSeq + 1) {
          this.writes.apply(m);
          run.applied++;
        } else if (run.items > 1) {
          // A jump inside one answer: the buffer held the batches before it, so the ROUTER dropped some (a
          // ROUTER does not wait for a slow reader past its send high-water mark: a loaded host). Stop here;
          // the next replay asks again from the last batch applied.
          run.skipped = { after: state.lastSeq, got: m.seq };
          return false;
        } else {
          // The buffer no longer holds what we miss: clear, and start a fresh contiguous run here.
          this.writes.clear('gap');
          this.writes.apply(m);
          run.applied++;
        }
        // A replay is a burst: let the index catch up rather than overflow the write queue.
        const room = settings.queue.maxQueuedOps / 2;
        return queue.queuedOps > room
          ? queue.waitForRoom(room).then(() => !state.stopped && !run.cancelled)
          : true;
      },
      settings.maxFrameBytes,
    );
    const outcome = await Promise.race([request, run.done]);
    if (state.replayRun === run) state.replayRun = null;
    if (outcome === null) {
      // The request may still get its answer; requestReplay then stops at the first item and closes.
      stats.replays.cancelled++;
      this.cx.log.debug('replay cut short', {
        from,
        reason: state.stopped ? 'stopping' : 'a live batch came first',
      });
      return { same: null, bounded: false, complete: false, cutShort: false, unanswered: false };
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
    stats.replays[result]++;
    this.cx.log.info('replay', {
      from,
      result,
      items: outcome.items,
      firstSeq: first,
      lastSeq: state.lastSeq,
    });
    if (run.skipped)
      this.cx.log.warn('replay answer skipped batches (the ROUTER dropped them): asking again', {
        ...run.skipped,
        applied: run.applied,
      });
    return {
      same,
      bounded: run.bounded && same !== false,
      complete: outcome.kind === 'complete',
      // Stopped early (timeout, error) after it confirmed our last batch and applied some past it.
      // (`same` is set in the reply callback, which TypeScript's narrowing does not see.)
      cutShort:
        (outcome.kind !== 'complete' &&
          !run.bounded &&
          (same as boolean | null) === true &&
          run.applied > 0) ||
        (run.skipped !== null && run.applied > 0),
      // A skip before anything was applied is retried as an unanswered replay: at most UNANSWERED_RETRIES.
      unanswered:
        (outcome.kind === 'timeout' && outcome.items === 0) || (run.skipped !== null && run.applied === 0),
    };
  }

  /**
   * The live batch that started a resync, once the replay is done. No further replay from here, but one:
   * the batch shows a new process (other bytes under a used number) that the replay could not confirm (its
   * buffer never returned anything): the new process's buffer is read from 0 before the batch. `complete`:
   * the replay read the buffer to its end; one cut short (a timeout, a frame ZMQ refused) proves no hole.
   */
  async #afterResync(
    trigger: SequencedPayload,
    sameProcess: boolean | null,
    complete: boolean,
  ): Promise<void> {
    const { state } = this.cx;
    const pos = classifySeq(state.lastSeq, trigger.seq);
    if (pos.kind === 'next' || pos.kind === 'first') this.writes.apply(trigger);
    else if (pos.kind === 'gap' && sameProcess === true && complete) {
      // The engine's buffer, read to its end after this batch arrived, holds our last batch and nothing up to this one:
      // the engine never published it (a forged or corrupt number). Clearing for it would cost the index.
      this.cx.stats.unconfirmed++;
      this.cx.drops.note('unconfirmed', 1, () => ({ seq: trigger.seq, last: state.lastSeq }));
    } else if (pos.kind === 'gap') {
      // Still a hole before the trigger (no replay, or it did not reach that far): clear and restart here.
      this.writes.clear('gap');
      this.writes.apply(trigger);
    } else if (this.judgeBehind(trigger, sameProcess, false, true) === 'restart') {
      this.#forgetProcess('restart');
      if (this.cx.spec.kvEventsReplay && trigger.seq > 0 && sameProcess === null) await this.#replay(false);
      const now = classifySeq(state.lastSeq, trigger.seq);
      if (now.kind === 'next' || now.kind === 'first') this.writes.apply(trigger);
    }
  }

  /** A new publisher process: its hashes and sequence numbers are not the ones we know. */
  #forgetProcess(reason: 'restart' | 'restart_signal'): void {
    this.cx.mapper.reset();
    this.cx.state.window.reset();
    this.cx.state.lastTsSec = null;
    this.writes.clear(reason);
  }
}
