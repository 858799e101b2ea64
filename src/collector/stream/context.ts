// What the parts of one stream share: its collaborators, its clock, and its mutable state in one object.
import type { HandoffStore, IndexWriter, LeaseLostError, PodRef } from '../../index/index.js';
import type { KeyMapper } from '../key-mapper.js';
import type { Logger } from '../logger.js';
import type { ApplyQueue, ApplyQueueOptions } from '../ops/apply-queue.js';
import type { PodStateWriter } from '../ops/pod-state-writer.js';
import type { StreamSpec } from '../pods.js';
import type { ReplayLimits } from '../replay-control.js';
import { AppliedWindow } from '../sequence.js';
import type { DropReport, StreamStats } from '../stream-stats.js';
import type { ReplayRun } from './replay-run.js';

export interface StreamSettings {
  /** The router's block size for this model. */
  blockSize: number;
  blockMapMaxEntries: number;
  replayTimeoutMs: number;
  /** Live batches held while a replay runs; beyond it they are dropped, and replayed once the inbox drains. */
  liveBufferBatches: number;
  receiveHighWaterMark: number;
  /** Largest ZMQ frame accepted, live or replayed (ZMQ maxMessageSize); default DEFAULT_MAX_FRAME_BYTES. */
  maxFrameBytes?: number;
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
  /**
   * The stream's clock (ms since the epoch), for every time it writes or compares: clears, freshness,
   * checkpoints, handoffs, replay control, apply times. Default: the system clock.
   */
  now?: () => number;
}

/** Applied batches whose digest is remembered, to recognise a duplicate and a new process. */
export const APPLIED_WINDOW = 256;

/**
 * The stream's mutable state, shared by its parts (ingest loop, resync, handoff step, pod writes). Each
 * part keeps to itself what no other part reads.
 */
export class StreamState {
  /** The last batch applied; null when nothing was ingested since the last clear. */
  lastSeq: number | null = null;
  /** Publisher timestamp (s) of the last batch applied; null when unknown (none since a restart). */
  lastTsSec: number | null = null;
  /** Digests of the batches applied from the current publisher process. */
  readonly window = new AppliedWindow(APPLIED_WINDOW);
  /** The ROUTER has returned batches: its buffer keeps them (vLLM buffer_steps > 0). */
  bufferKeeps = false;
  /** PodState.partialSinceMs as this stream last wrote it. */
  partialSinceMs = 0;
  /** PodState.resyncing as this stream last wrote it. */
  resyncing = false;
  /** The index came back and a recovery resync is queued: until it has run, the pod is not rebuilt. */
  recoveryPending = false;
  stopped = false;
  /** The SUB socket is connected to the pod's publisher. */
  connected = false;
  /** When a restart seen in the event stream itself was last handled (ms). */
  streamRestartAtMs: number | null = null;
  /** When lastEventAtMs was last written (ms). */
  freshAtMs = 0;
  /** When something was last queued for the index (ms): a checkpoint waits for the stream to be quiet. */
  changedAtMs = 0;
  /** The replay in progress, if any: a live batch may cut it short, and is then an expected overlap. */
  replayRun: ReplayRun | null = null;
}

/** The hooks of the stream's owner (StreamObserver, bound to the worker). */
export interface StreamOwnerHooks {
  leaseLost(err: LeaseLostError): void;
  resumed(processStartSec: number | null): void;
  processStartSec(): number | null;
}

/** Everything one part of a stream works with: collaborators, clock and the shared state. */
export interface StreamContext {
  readonly spec: StreamSpec;
  readonly settings: StreamSettings;
  readonly pod: PodRef;
  readonly index: IndexWriter & HandoffStore;
  readonly log: Logger;
  readonly stats: StreamStats;
  readonly mapper: KeyMapper;
  readonly queue: ApplyQueue;
  readonly writer: PodStateWriter;
  readonly drops: DropReport;
  readonly owner: StreamOwnerHooks;
  readonly now: () => number;
  readonly state: StreamState;
}

/**
 * An exception contained in the stream: a bug, not the input's fault (the decoder rejects bad input).
 * Counted and logged (the first 10, then every 1000th); the stream goes on with the next batch.
 */
export function internalError(
  cx: Pick<StreamContext, 'stats' | 'log'>,
  stage: 'ingest' | 'observer',
  err: unknown,
): void {
  const n = ++cx.stats.internalErrors[stage];
  if (n <= 10 || n % 1000 === 0)
    cx.log.error(`stream ${stage} failed; the stream goes on`, { stage, count: n, err });
}
