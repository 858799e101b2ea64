// Per-stream counters (clears, replays, handoffs, drops) for /metrics, and rate-limited drop logging.
import {
  DECODE_ERROR_REASONS,
  INVALID_EVENT_REASONS,
  type DecodeErrorReason,
  type InvalidEventReason,
} from './events.js';
import { newMapperCounters, type MapperCounters } from './key-mapper.js';
import type { Logger } from './logger.js';
import { newReplayControlStats, type ReplayControlStats } from './replay-control.js';

export const CLEAR_REASONS = ['start', 'gap', 'restart', 'recovery', 'restart_signal'] as const;
export type ClearReason = (typeof CLEAR_REASONS)[number];

/**
 * covered: the buffer held everything we asked for; partial: it had moved past part of it (the pod is
 * cleared); empty: nothing to replay; restart: the buffer is a new process's (it no longer holds the last
 * batch applied); cancelled: a live batch arrived before the first reply (connection replays only);
 * timeout / error: no usable reply; bounded: stopped at REPLAY_MAX_BATCHES / REPLAY_MAX_BYTES, the rest
 * left to the next replay (replay-control.ts).
 */
export const REPLAY_RESULTS = [
  'covered',
  'bounded',
  'partial',
  'empty',
  'restart',
  'cancelled',
  'timeout',
  'error',
] as const;
export type ReplayResult = (typeof REPLAY_RESULTS)[number];

/**
 * At start, what became of the previous collector's handoff (handoff.ts): resumed from it; none left; stale
 * (the pod was written since); invalid (unreadable, another version); mismatch (another endpoint, topic or
 * block size); error (Redis did not answer). Every result but resumed clears the pod.
 */
export const HANDOFF_TAKE_RESULTS = ['resumed', 'none', 'stale', 'invalid', 'mismatch', 'error'] as const;
export type HandoffTakeResult = (typeof HANDOFF_TAKE_RESULTS)[number];
/**
 * saved: at a clean stop; checkpointed: after a quiet spell (handoff_checkpoint_ms); not_ready: none, or
 * refused (writes left or lost, nothing ingested since a clear, or a write landed after it was taken);
 * timeout: shutdown_timeout_ms spent before its turn; failed: Redis did not take it.
 */
export const HANDOFF_SAVE_RESULTS = ['saved', 'checkpointed', 'not_ready', 'timeout', 'failed'] as const;
export type HandoffSaveResult = (typeof HANDOFF_SAVE_RESULTS)[number];

/**
 * Exceptions contained inside a stream, by where: ingest (decoding, keying and queueing a batch), observer
 * (the metrics and hooks told of a write). Each is a bug: it is logged, counted, and the stream goes on.
 */
export const INTERNAL_ERROR_STAGES = ['ingest', 'observer'] as const;
export type InternalErrorStage = (typeof INTERNAL_ERROR_STAGES)[number];

/** Plain counters for one event stream (one pod, one DP rank); /metrics exports them at scrape time. */
export interface StreamStats extends MapperCounters {
  framesReceived: number;
  /** Frames that are not [topic, seq8, payload]. */
  malformedFrames: number;
  /** Connections libzmq dropped at a refused frame (over zmq_max_frame_bytes, or breaking ZMTP). */
  framesRefused: number;
  batches: number;
  events: number;
  decodeErrors: Record<DecodeErrorReason, number>;
  invalidEvents: Record<InvalidEventReason, number>;
  unknownEvents: number;
  unknownFields: number;
  /** Batches already applied (same number, same bytes), dropped. */
  duplicates: number;
  /** Batches older than the last applied one from the same process, never applied, dropped. */
  outOfOrder: number;
  gaps: number;
  missingBatches: number;
  /** Batches numbered past the end of the engine's replay buffer, which still holds the last one applied. */
  unconfirmed: number;
  restarts: number;
  replays: Record<ReplayResult, number>;
  replayedBatches: number;
  podClears: Record<ClearReason, number>;
  handoffTakes: Record<HandoffTakeResult, number>;
  handoffSaves: Record<HandoffSaveResult, number>;
  /** Live batches dropped before decoding: inbox full during a replay, or writes suspended. */
  liveDropped: number;
  /** Replays run again because live batches were dropped (inbox full) during a replay. */
  liveDropReplays: number;
  overflows: number;
  droppedOps: number;
  droppedBatches: number;
  applyCalls: number;
  appliedBatches: number;
  appliedOps: number;
  applyErrors: number;
  stateWriteErrors: number;
  dpRankMismatches: number;
  internalErrors: Record<InternalErrorStage, number>;
  /** Replay control (replay-control.ts): resyncs asked for, merged into a waiting one, and held back. */
  replayControl: ReplayControlStats;
}

const zero = <K extends string>(keys: readonly K[]): Record<K, number> =>
  Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;

export function newStreamStats(): StreamStats {
  return {
    ...newMapperCounters(),
    framesReceived: 0,
    malformedFrames: 0,
    framesRefused: 0,
    batches: 0,
    events: 0,
    decodeErrors: zero(DECODE_ERROR_REASONS),
    invalidEvents: zero(INVALID_EVENT_REASONS),
    unknownEvents: 0,
    unknownFields: 0,
    duplicates: 0,
    outOfOrder: 0,
    gaps: 0,
    missingBatches: 0,
    unconfirmed: 0,
    restarts: 0,
    replays: zero(REPLAY_RESULTS),
    replayedBatches: 0,
    podClears: zero(CLEAR_REASONS),
    handoffTakes: zero(HANDOFF_TAKE_RESULTS),
    handoffSaves: zero(HANDOFF_SAVE_RESULTS),
    liveDropped: 0,
    liveDropReplays: 0,
    overflows: 0,
    droppedOps: 0,
    droppedBatches: 0,
    applyCalls: 0,
    appliedBatches: 0,
    appliedOps: 0,
    applyErrors: 0,
    stateWriteErrors: 0,
    dpRankMismatches: 0,
    internalErrors: zero(INTERNAL_ERROR_STAGES),
    replayControl: newReplayControlStats(),
  };
}

/** What a stream drops or ignores, beyond whole frames and payloads (those have their own log lines). */
export const DROP_KINDS = {
  unknown_event: { level: 'warn', msg: 'kv event of a type this collector does not know: skipped' },
  not_tagged: { level: 'warn', msg: 'kv event is neither a tagged map nor a tagged array: dropped' },
  bad_field: { level: 'warn', msg: 'kv event with a field of the wrong type: dropped' },
  unknown_medium: { level: 'warn', msg: 'kv event with a medium other than GPU, CPU or STORAGE: dropped' },
  extra_keys_length: {
    level: 'warn',
    msg: 'kv event whose extra_keys does not have one entry per block: dropped',
  },
  out_of_range: {
    level: 'warn',
    msg: 'kv event with a number no engine sends (not finite, not whole, or out of its range): dropped',
  },
  unknown_field: { level: 'info', msg: 'kv event fields this collector does not know: ignored' },
  dp_rank_mismatch: {
    level: 'warn',
    msg: "batch data_parallel_rank differs from this endpoint's rank: indexed under this endpoint's pod",
  },
  duplicate: { level: 'info', msg: 'batch already applied (same number, same bytes): dropped' },
  out_of_order: {
    level: 'warn',
    msg: 'batch older than the last one applied, from the same engine process: dropped',
  },
  unconfirmed: {
    level: 'warn',
    msg: "batch numbered past the end of the engine's replay buffer, which holds the last one applied: not the engine's, dropped",
  },
} as const;
export type DropKind = keyof typeof DROP_KINDS;

/**
 * Rate-limited logging of dropped or ignored events: the first occurrence of each kind per stream is logged
 * with its reason and an example, later ones are counted and logged as one summary at most every
 * `summaryEveryMs` (when `flush` is called: the stream's timer, and stop). The counters on /metrics count
 * every one.
 */
export class DropReport {
  readonly #seen = new Set<DropKind>();
  readonly #since = new Map<DropKind, number>();
  #lastSummaryMs: number;

  constructor(
    readonly log: Logger,
    readonly summaryEveryMs = 60_000,
    readonly now: () => number = Date.now,
  ) {
    this.#lastSummaryMs = now();
  }

  /** `n` occurrences of `kind`; `detail` is called for the first one only. */
  note(kind: DropKind, n: number, detail: () => Record<string, unknown>): void {
    if (n <= 0) return;
    if (!this.#seen.has(kind)) {
      this.#seen.add(kind);
      const d = DROP_KINDS[kind];
      this.log[d.level](d.msg, {
        kind,
        count: n,
        ...detail(),
        next: `counted; summarized at most every ${Math.round(this.summaryEveryMs / 1000)} s`,
      });
      return;
    }
    this.#since.set(kind, (this.#since.get(kind) ?? 0) + n);
  }

  /** Logs the counts since the last summary, if there are any and the period has passed (or `force`). */
  flush(force = false): void {
    const now = this.now();
    if (this.#since.size === 0 || (!force && now - this.#lastSummaryMs < this.summaryEveryMs)) return;
    this.log.info('kv events dropped or ignored since the last summary', {
      sinceMs: now - this.#lastSummaryMs,
      counts: Object.fromEntries(this.#since),
    });
    this.#since.clear();
    this.#lastSummaryMs = now;
  }
}

const KNOWN_EVENTS = new Set(['BlockStored', 'BlockRemoved', 'AllBlocksCleared']);
const KNOWN_MEDIA = new Set(['GPU', 'CPU', 'STORAGE']);
const isMap = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);

/**
 * An example of what a drop of `kind` was about, for its first log line: the unknown tag, the unknown
 * medium, the shape of an untagged event. Decodes the payload again (once per kind and stream).
 */
export function dropExample(decoded: unknown, kind: DropKind): Record<string, unknown> {
  const events = Array.isArray(decoded) ? decoded[1] : isMap(decoded) ? decoded.events : undefined;
  if (!Array.isArray(events)) return {};
  for (const e of events as unknown[]) {
    const tag = Array.isArray(e) ? (e[0] as unknown) : isMap(e) ? e.type : undefined;
    if (kind === 'not_tagged' && typeof tag !== 'string')
      return {
        example: Array.isArray(e) ? 'array without a string tag' : isMap(e) ? 'map without "type"' : typeof e,
      };
    if (kind === 'unknown_event' && typeof tag === 'string' && !KNOWN_EVENTS.has(tag)) return { tag };
    if (kind === 'unknown_medium' && (tag === 'BlockStored' || tag === 'BlockRemoved')) {
      // array_like positions: BlockStored [tag, hashes, parent, tokens, block_size, lora_id, medium, …],
      // BlockRemoved [tag, hashes, medium, …].
      const m = Array.isArray(e) ? (e[tag === 'BlockStored' ? 6 : 2] as unknown) : isMap(e) ? e.medium : null;
      if (typeof m === 'string' && !KNOWN_MEDIA.has(m)) return { medium: m };
    }
  }
  return {};
}
