// The collector's own Prometheus /metrics: per-pod counters, calibration gauges, write histograms.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Calibration, DecodeSteps } from '../core/types.js';
import type { PrefillSource } from './metrics/calibration.js';
import type { StreamWorker } from './stream-worker.js';
import type { LeaseState } from './writer-lease-keeper.js';

type Row = [labels: Record<string, string>, value: number];
type Reader = (w: StreamWorker) => Row[];

const pod = (w: StreamWorker): Record<string, string> => ({ pod: w.pod.podId });
const one =
  (f: (w: StreamWorker) => number): Reader =>
  (w) => [[pod(w), f(w)]];
const byKey =
  (label: string, f: (w: StreamWorker) => Record<string, number>): Reader =>
  (w) =>
    Object.entries(f(w)).map(([k, v]): Row => [{ pod: w.pod.podId, [label]: k }, v]);

const P = 'kinference_collector_';

/** Counters read from each stream's plain StreamStats at scrape time (the hot path only bumps numbers). */
const COUNTERS: [name: string, help: string, labels: string[], read: Reader][] = [
  ['frames_received_total', 'ZMQ messages received from the pod', [], one((w) => w.stats.framesReceived)],
  [
    'malformed_frames_total',
    'ZMQ messages that are not [topic, seq8, payload]',
    [],
    one((w) => w.stats.malformedFrames),
  ],
  [
    'frames_refused_total',
    'Live connections ZMQ dropped at a frame over zmq_max_frame_bytes (refused before it was buffered) or breaking ZMTP; each is reconnected and its gap replayed',
    [],
    one((w) => w.stats.framesRefused),
  ],
  ['batches_total', 'Event batches ingested (live and replayed)', [], one((w) => w.stats.batches)],
  ['events_total', 'KV events decoded', [], one((w) => w.stats.events)],
  [
    'block_events_total',
    'Blocks announced by BlockStored / BlockRemoved events',
    ['kind'],
    (w) => [
      [{ ...pod(w), kind: 'stored' }, w.stats.storedBlocks],
      [{ ...pod(w), kind: 'removed' }, w.stats.removedBlocks],
    ],
  ],
  ['all_blocks_cleared_total', 'AllBlocksCleared events', [], one((w) => w.stats.clears)],
  [
    'decode_errors_total',
    'Payloads that could not be decoded, by reason',
    ['reason'],
    byKey('reason', (w) => w.stats.decodeErrors),
  ],
  [
    'invalid_events_total',
    'Events dropped for a field of the wrong type, by reason',
    ['reason'],
    byKey('reason', (w) => w.stats.invalidEvents),
  ],
  [
    'unknown_events_total',
    'Events with a tag we do not know (skipped)',
    [],
    one((w) => w.stats.unknownEvents),
  ],
  [
    'unknown_fields_total',
    'Event or batch fields we do not know (ignored)',
    [],
    one((w) => w.stats.unknownFields),
  ],
  [
    'blocks_skipped_total',
    'Blocks not written to the index, by reason',
    ['reason'],
    byKey('reason', (w) => w.stats.skipped),
  ],
  ['index_ops_total', 'Block store/remove ops written to the index', [], one((w) => w.stats.appliedOps)],
  ['index_writes_total', 'apply() calls to the index', [], one((w) => w.stats.applyCalls)],
  [
    'index_write_errors_total',
    'Failed index writes (retried)',
    ['kind'],
    (w) => [
      [{ ...pod(w), kind: 'apply' }, w.stats.applyErrors],
      [{ ...pod(w), kind: 'state' }, w.stats.stateWriteErrors],
    ],
  ],
  [
    'eviction_removals_total',
    'Removals issued because the bounded block map evicted a held block',
    [],
    one((w) => w.stats.evictionRemovals),
  ],
  ['sequence_gaps_total', 'Jumps in the batch sequence', [], one((w) => w.stats.gaps)],
  ['missing_batches_total', 'Batches missing across sequence gaps', [], one((w) => w.stats.missingBatches)],
  [
    'duplicate_batches_total',
    'Batches already applied (same number, same bytes), dropped',
    [],
    one((w) => w.stats.duplicates),
  ],
  [
    'out_of_order_batches_total',
    'Batches older than the last applied one, from the same engine process, dropped',
    [],
    one((w) => w.stats.outOfOrder),
  ],
  [
    'unconfirmed_batches_total',
    "Batches numbered past the end of the engine's replay buffer, which still holds the last batch applied (forged or corrupt numbers), dropped",
    [],
    one((w) => w.stats.unconfirmed),
  ],
  [
    'restarts_total',
    'Engine restarts detected from the event stream (a used sequence number with new content, or the replay buffer)',
    [],
    one((w) => w.stats.restarts),
  ],
  ['replays_total', 'Replay requests, by result', ['result'], byKey('result', (w) => w.stats.replays)],
  ['replayed_batches_total', 'Batches received from replay', [], one((w) => w.stats.replayedBatches)],
  [
    'pod_clears_total',
    'Times the pod was cleared in the index, by reason',
    ['reason'],
    byKey('reason', (w) => w.stats.podClears),
  ],
  [
    'handoff_takes_total',
    "At start, the previous collector's handoff, by result (resumed: the pod was not cleared)",
    ['result'],
    byKey('result', (w) => w.stats.handoffTakes),
  ],
  [
    'handoff_saves_total',
    'At a clean stop, handoffs left for the next collector, by result',
    ['result'],
    byKey('result', (w) => w.stats.handoffSaves),
  ],
  [
    'live_dropped_total',
    'Live batches dropped before decoding (replay backlog or index down)',
    [],
    one((w) => w.stats.liveDropped),
  ],
  [
    'live_drop_replays_total',
    'Replays run again for live batches dropped while a replay ran',
    [],
    one((w) => w.stats.liveDropReplays),
  ],
  [
    'queue_overflows_total',
    'Write queue overflows (index unavailable too long)',
    [],
    one((w) => w.stats.overflows),
  ],
  ['dropped_ops_total', 'Block ops dropped by queue overflows', [], one((w) => w.stats.droppedOps)],
  [
    'index_lost_total',
    'Times Redis no longer held the writes made for the pod (missing: restarted empty or flushed; rolled_back: restored from an older snapshot; overwritten: another writer); each clears and rebuilds the pod',
    ['reason'],
    byKey('reason', (w) => w.queue.losses),
  ],
  [
    'internal_errors_total',
    'Exceptions contained inside a stream, by stage (ingest: a batch; observer: a metric or hook told of a write); each is logged, and the stream goes on',
    ['stage'],
    byKey('stage', (w) => w.stats.internalErrors),
  ],
  [
    'replays_requested_total',
    "Resyncs that would replay the pod's buffer (gap, restart check, connection, recovery…)",
    [],
    one((w) => w.stats.replayControl.requested),
  ],
  [
    'replays_coalesced_total',
    'Replay requests merged into the one already held back (it replays from the last batch applied, covering them all)',
    [],
    one((w) => w.stats.replayControl.coalesced),
  ],
  [
    'replays_refused_total',
    "Replay requests held back (interval: too soon after the last replay; budget: the window's replays spent) and replays stopped at their bounds (bounded) or cut short by a timeout after they applied batches (cut_short), and replays that timed out before any reply while a batch waited on them (unanswered, asked again twice); each is run later as one replay",
    ['reason'],
    byKey('reason', (w) => w.stats.replayControl.refused),
  ],
  [
    'dp_rank_mismatches_total',
    'Batches whose data_parallel_rank differs from the endpoint rank',
    [],
    one((w) => w.stats.dpRankMismatches),
  ],
];

const GAUGES: [name: string, help: string, read: Reader][] = [
  ['queue_ops', 'Block ops waiting to be written', one((w) => w.queue.queuedOps)],
  ['block_map_entries', 'vLLM hash → key entries held', one((w) => w.mapper.size)],
  [
    'resyncing',
    '1 while the pod is being rebuilt after a gap, restart or outage',
    one((w) => (w.resyncing ? 1 : 0)),
  ],
  ['last_sequence', 'Last ingested batch sequence number', one((w) => w.lastSeq ?? -1)],
  [
    'partial_since_seconds',
    "When the pod was last rebuilt without its engine's first batch (blocks cached before may be missing until reused), Unix seconds; 0 when complete",
    one((w) => w.partialSinceMs / 1000),
  ],
];

export interface ScrapeView {
  podId: string;
  ok: number;
  failed: number;
  healthy: boolean;
  blockSize: number | null;
  numGpuBlocks: number | null;
  /** The pod's max_model_len from its /v1/models; null before one was read. */
  maxModelLen: number | null;
  /**
   * Per DP rank (null: the pod has one engine), its own calibration estimate with what set its prefill
   * cost, and the calibration last written to the index (its group's pooled one when pooling); null before one.
   */
  calibrations: {
    rank: number | null;
    calibration: Calibration | null;
    prefillSource: PrefillSource | null;
    written: Calibration | null;
    /** The rank's own decode steps, and those written (pooled or own); null before any. */
    decodeSteps: DecodeSteps | null;
    writtenDecodeSteps: DecodeSteps | null;
  }[];
}

type ScrapeCalibration = ScrapeView['calibrations'][number];

/** One series per pod, DP rank and coefficient of the calibration and decode steps `pick` selects (each
 * skipped while null). */
function* calibrationSeries(
  views: Iterable<ScrapeView>,
  pick: (c: ScrapeCalibration) => [Calibration | null, DecodeSteps | null],
): Generator<{
  pod: string;
  rank: string;
  coefficient: string;
  value: number;
  prefillSource: string | null;
}> {
  for (const s of views)
    for (const c of s.calibrations) {
      const [cal, steps] = pick(c);
      const at = {
        pod: s.podId,
        rank: c.rank === null ? '' : String(c.rank),
        prefillSource: c.prefillSource,
      };
      if (cal) {
        yield { ...at, coefficient: 'prefill_ms_per_token', value: cal.prefillMsPerToken };
        yield { ...at, coefficient: 'decode_step_ms', value: cal.decodeStepMs };
      }
      const line = steps?.line;
      if (line) {
        yield { ...at, coefficient: 'decode_base_ms', value: line.baseMs };
        yield { ...at, coefficient: 'decode_ms_per_1k_context', value: line.msPerContextToken * 1000 };
      }
    }
}

/**
 * The collector's own /metrics: a private prom-client registry (never the global one), process metrics,
 * per-pod counters exported from StreamStats, and two histograms observed as writes complete.
 */
export class CollectorMetrics {
  readonly registry = new Registry();
  readonly lag: Histogram<'pod'>;
  readonly applySeconds: Histogram<string>;

  /**
   * `lease`: the writer lease's state, null without one (the standby gauges then stay 0 / absent).
   * `discovery`: whether discovery has read its source, and each followed pod's readiness.
   */
  constructor(
    workers: () => Iterable<StreamWorker>,
    scrapes: () => Iterable<ScrapeView>,
    lease: () => LeaseState | null = () => null,
    discovery: () => { synced: boolean; pods: Iterable<{ podId: string; ready: boolean }> } = () => ({
      synced: true,
      pods: [],
    }),
  ) {
    const reg = this.registry;
    collectDefaultMetrics({ register: reg, prefix: P });
    new Gauge({
      name: `${P}discovery_synced`,
      help: '1 once discovery has read its source (a Kubernetes EndpointSlice list succeeded); 0 while no pod is known, as when the API server refuses the list',
      registers: [reg],
      collect() {
        this.set(discovery().synced ? 1 : 0);
      },
    });
    new Gauge({
      name: `${P}pod_ready`,
      help: '1 when the pod passes its readiness probe; 0 while it fails it (followed, its index kept, out of routing for kubernetes.not_ready_grace_ms)',
      labelNames: ['pod'],
      registers: [reg],
      collect() {
        this.reset();
        for (const p of discovery().pods) this.set({ pod: p.podId }, p.ready ? 1 : 0);
      },
    });
    new Gauge({
      name: `${P}standby`,
      help: '1 while another collector holds the writer lease of a model this one owns: it follows no pod and waits to take over',
      registers: [reg],
      collect() {
        this.set(lease() === 'standby' ? 1 : 0);
      },
    });
    new Gauge({
      name: `${P}writer_lease_held`,
      help: '1 while this collector holds the writer lease of every model it owns (the one writer of their index); absent without a lease',
      registers: [reg],
      collect() {
        const s = lease();
        this.reset();
        if (s !== null) this.set(s === 'held' ? 1 : 0);
      },
    });
    for (const [name, help, labels, read] of COUNTERS)
      new Counter({
        name: P + name,
        help,
        labelNames: ['pod', ...labels],
        registers: [reg],
        collect() {
          this.reset();
          for (const w of workers()) for (const [l, v] of read(w)) this.inc(l, v);
        },
      });
    for (const [name, help, read] of GAUGES)
      new Gauge({
        name: P + name,
        help,
        labelNames: ['pod'],
        registers: [reg],
        collect() {
          this.reset();
          for (const w of workers()) for (const [l, v] of read(w)) this.set(l, v);
        },
      });
    new Gauge({
      name: `${P}streams`,
      help: 'Event streams followed (pods × DP ranks)',
      registers: [reg],
      collect() {
        this.set([...workers()].length);
      },
    });
    new Counter({
      name: `${P}scrapes_total`,
      help: 'Scrapes of pod /metrics, by result',
      labelNames: ['pod', 'result'],
      registers: [reg],
      collect() {
        this.reset();
        for (const s of scrapes()) {
          this.inc({ pod: s.podId, result: 'ok' }, s.ok);
          this.inc({ pod: s.podId, result: 'error' }, s.failed);
        }
      },
    });
    new Gauge({
      name: `${P}pod_healthy`,
      help: '1 when the pod is healthy (its /metrics answers)',
      labelNames: ['pod'],
      registers: [reg],
      collect() {
        this.reset();
        for (const s of scrapes()) this.set({ pod: s.podId }, s.healthy ? 1 : 0);
      },
    });
    new Gauge({
      name: `${P}vllm_cache_config`,
      help: "The pod's vllm:cache_config_info: block_size and num_gpu_blocks",
      labelNames: ['pod', 'field'],
      registers: [reg],
      collect() {
        this.reset();
        for (const s of scrapes()) {
          if (s.blockSize !== null) this.set({ pod: s.podId, field: 'block_size' }, s.blockSize);
          if (s.numGpuBlocks !== null) this.set({ pod: s.podId, field: 'num_gpu_blocks' }, s.numGpuBlocks);
        }
      },
    });
    new Gauge({
      name: `${P}pod_max_model_len`,
      help: "The pod's context window in tokens (max_model_len in its /v1/models), written to the index for the router; absent until read",
      labelNames: ['pod'],
      registers: [reg],
      collect() {
        this.reset();
        for (const s of scrapes()) if (s.maxModelLen !== null) this.set({ pod: s.podId }, s.maxModelLen);
      },
    });
    new Gauge({
      name: `${P}calibration`,
      help: "The pod's own calibration estimate (source of the prefill cost: solo, median or totals prefills)",
      labelNames: ['pod', 'rank', 'coefficient', 'source'],
      registers: [reg],
      collect() {
        this.reset();
        for (const x of calibrationSeries(scrapes(), (c) => [c.calibration, c.decodeSteps])) {
          const source = x.coefficient === 'prefill_ms_per_token' ? (x.prefillSource ?? '') : '';
          this.set({ pod: x.pod, rank: x.rank, coefficient: x.coefficient, source }, x.value);
        }
      },
    });
    new Gauge({
      name: `${P}calibration_written`,
      help: 'The calibration written to the index for the router: the pooled one of like pods, or the own',
      labelNames: ['pod', 'rank', 'coefficient'],
      registers: [reg],
      collect() {
        this.reset();
        for (const x of calibrationSeries(scrapes(), (c) => [c.written, c.writtenDecodeSteps]))
          this.set({ pod: x.pod, rank: x.rank, coefficient: x.coefficient }, x.value);
      },
    });
    this.lag = new Histogram({
      name: `${P}event_lag_seconds`,
      help: 'From the publisher timestamp of a batch to its write into the index resolving',
      labelNames: ['pod'],
      buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30],
      registers: [reg],
    });
    this.applySeconds = new Histogram({
      name: `${P}index_write_seconds`,
      help: 'Latency of one index write (apply() call: Redis round trip and script)',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [reg],
    });
  }
}
