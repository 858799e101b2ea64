import type { DecodeErrorReason, InvalidEventReason } from './events.js';
import { newMapperCounters, type MapperCounters } from './key-mapper.js';

export const CLEAR_REASONS = ['start', 'gap', 'restart', 'recovery', 'restart_signal'] as const;
export type ClearReason = (typeof CLEAR_REASONS)[number];

export const REPLAY_RESULTS = ['covered', 'partial', 'empty', 'timeout', 'error'] as const;
export type ReplayResult = (typeof REPLAY_RESULTS)[number];

/** Plain counters for one event stream (one pod, one DP rank); /metrics exports them at scrape time. */
export interface StreamStats extends MapperCounters {
  framesReceived: number;
  /** Frames that are not [topic, seq8, payload]. */
  malformedFrames: number;
  batches: number;
  events: number;
  decodeErrors: Record<DecodeErrorReason, number>;
  invalidEvents: Record<InvalidEventReason, number>;
  unknownEvents: number;
  unknownFields: number;
  duplicates: number;
  gaps: number;
  missingBatches: number;
  restarts: number;
  replays: Record<ReplayResult, number>;
  replayedBatches: number;
  podClears: Record<ClearReason, number>;
  /** Live batches dropped before decoding: inbox full during a replay, or writes suspended. */
  liveDropped: number;
  overflows: number;
  droppedOps: number;
  droppedBatches: number;
  applyCalls: number;
  appliedBatches: number;
  appliedOps: number;
  applyErrors: number;
  stateWriteErrors: number;
  dpRankMismatches: number;
}

const zero = <K extends string>(keys: readonly K[]): Record<K, number> =>
  Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;

export function newStreamStats(): StreamStats {
  return {
    ...newMapperCounters(),
    framesReceived: 0,
    malformedFrames: 0,
    batches: 0,
    events: 0,
    decodeErrors: zero(['msgpack', 'truncated', 'batch_shape', 'batch_field'] as const),
    invalidEvents: zero(['not_tagged', 'bad_field', 'unknown_medium', 'extra_keys_length'] as const),
    unknownEvents: 0,
    unknownFields: 0,
    duplicates: 0,
    gaps: 0,
    missingBatches: 0,
    restarts: 0,
    replays: zero(REPLAY_RESULTS),
    replayedBatches: 0,
    podClears: zero(CLEAR_REASONS),
    liveDropped: 0,
    overflows: 0,
    droppedOps: 0,
    droppedBatches: 0,
    applyCalls: 0,
    appliedBatches: 0,
    appliedOps: 0,
    applyErrors: 0,
    stateWriteErrors: 0,
    dpRankMismatches: 0,
  };
}
