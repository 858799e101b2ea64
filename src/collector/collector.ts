// The collector: one runner (event streams + metrics scraper) per discovered pod, started and stopped.
import type { CollectorSection } from '../config/collector-section.js';
import {
  LeaseLostError,
  describeLeaseHolder,
  type HandoffStore,
  type IndexReader,
  type IndexWriter,
  type LeaseConflict,
  type LeaseHolder,
  type WriterLease,
} from '../index/index.js';
import { CollectorMetrics, type ScrapeView } from './collector-metrics.js';
import type { Discovery } from './discovery/discovery.js';
import { EventSilenceWatch, computedPromptTokens } from './event-silence.js';
import type { Logger } from './logger.js';
import { calibrationOptions } from './metrics/calibration.js';
import { CalibrationPools } from './metrics/calibration-pool.js';
import { MetricsScraper } from './metrics/scraper.js';
import { ModelWindowReader, modelsUrlOf } from './models/model-window-reader.js';
import { engineView, type PodMetrics } from './metrics/vllm-metrics.js';
import type { QueuedBatch } from './ops/apply-queue.js';
import { podShard, type PodShard } from './pod-shard.js';
import { samePodSpec, streamsOf, type PodSpec } from './pods.js';
import { StreamWorker, type StreamSettings } from './stream-worker.js';
import { WriterLeaseKeeper, type LeaseState } from './writer-lease-keeper.js';

/** Called after each index write with the batches it covered (benchmarks measure lag with it). */
export type AppliedListener = (podId: string, batches: readonly QueuedBatch[], appliedAtMs: number) => void;

export interface CollectorDeps {
  index: IndexReader & IndexWriter & HandoffStore;
  discovery: Discovery;
  log: Logger;
  /** Block size the router uses, per model (fleet `models.<name>.block_size`). */
  blockSizes: Record<string, number>;
  /**
   * Models whose index entries this collector owns: at start and after every discovery change, the pods
   * registered for them that it does not run (left over from an earlier config or a crash) are removed.
   * Absent or empty: nothing is removed but the pods it ran itself. Without a `lease`, another collector
   * sharing the Redis and key prefix must own other models.
   */
  ownedModels?: readonly string[];
  /**
   * Follow only the pods of this shard (pod-shard.ts; collector.shard_index of shard_count): pods of other
   * shards are neither followed nor removed as stale, as another collector writes them. Default: every pod.
   */
  shard?: PodShard;
  /**
   * The writer lease of the owned models (run.ts makes one for Redis). With it, start() stands by until
   * the lease is ours before it follows a pod, writes or removes anything; a lease lost to another
   * collector stops every write at once and calls `onLeaseLost`. Without it (the memory index, tests),
   * nothing guards against a second writer. run.ts also fences the index with the lease's holder value
   * (RedisKvIndexOptions.fence): a write the index refuses (KINF_ERR_LEASE_LOST) is a lost lease too.
   */
  lease?: WriterLease;
  /** The lease went to another collector: every write was dropped and the collector is stopping. */
  onLeaseLost?: (lost: LeaseConflict[]) => void;
  onApplied?: AppliedListener;
}

/** Pause before checking the index for stale pods again after a failed check (Redis down). */
export const STALE_SWEEP_RETRY_MS = 5000;

/**
 * A stream whose engine computed this many uncached prompt tokens (and at least 8 blocks' worth) with no
 * KV-event frame arriving is reported as not heard (event-silence.ts); again every SILENT_STREAM_REPEAT_MS.
 */
export const SILENT_STREAM_MIN_TOKENS = 1024;
export const SILENT_STREAM_REPEAT_MS = 10 * 60_000;

interface PodRunner {
  spec: PodSpec;
  workers: StreamWorker[];
  /** Per worker: is its KV-event stream heard while the engine computes prompts? */
  silence: EventSilenceWatch[];
  scraper: MetricsScraper | null;
  /** Reads the pod's max_model_len from its /v1/models (with a metrics URL, models_interval_ms > 0). */
  models: ModelWindowReader | null;
  scrapeOk: number;
  scrapeFailed: number;
  /** Failing its readiness probe: followed, written unhealthy so that the router leaves it out. */
  ready: boolean;
}

export interface CollectorHealth {
  ok: boolean;
  stopping: boolean;
  /** Another collector holds the writer lease: this one follows nothing and waits to take over. */
  standby: boolean;
  /** Discovery has read its source (a Kubernetes list succeeded): before that no pod is followed. */
  discoverySynced: boolean;
  /** While standing by: who holds the lease (of the first model held). */
  holder?: LeaseHolder;
  /** With a lease: its state, the models it covers, and who else holds which. */
  writerLease?: {
    state: LeaseState;
    models: readonly string[];
    heldBy: { model: string; holder: LeaseHolder; expiresInMs: number | null }[];
  };
  streams: {
    pod: string;
    lastSeq: number | null;
    resyncing: boolean;
    queueOps: number;
    writesSuspended: boolean;
    healthy: boolean;
    ready: boolean;
  }[];
}

/**
 * The collector: keeps one PodRunner (event streams per DP rank + a metrics scraper) per discovered pod,
 * starts and stops them as discovery changes, and removes pods that leave from the index.
 */
export class Collector {
  readonly metrics: CollectorMetrics;
  readonly #pods = new Map<string, PodRunner>();
  /** Like pods' shared calibration and decode steps (calibration_pool). */
  readonly #calibrationPools = new CalibrationPools();
  #reconciling: Promise<void> = Promise.resolve();
  #stopping = false;
  #sweepRetry: NodeJS.Timeout | null = null;
  #sweepFailures = 0;
  readonly #lease: WriterLeaseKeeper | null;
  /** start() until discovery has started (or the standby ended without it): stop() waits for it. */
  #started: Promise<void> = Promise.resolve();
  /** Pods being flushed by stop(): a lease lost meanwhile must drop their writes too. */
  readonly #draining: PodRunner[] = [];
  /** The lease was lost (renewal or fence): handled once. */
  #leaseGone = false;

  constructor(
    readonly settings: CollectorSection,
    readonly deps: CollectorDeps,
  ) {
    this.#lease = deps.lease ? new WriterLeaseKeeper(deps.lease, deps.log) : null;
    this.metrics = new CollectorMetrics(
      () => this.workers(),
      () => this.#scrapeViews(),
      () => (this.#lease ? this.#lease.state : null),
      () => ({
        synced: this.deps.discovery.synced !== false,
        pods: [...this.#pods.values()].map((p) => ({ podId: p.spec.id, ready: p.ready })),
      }),
    );
  }

  /** The writer lease's state, null without a lease (a single collector). */
  get leaseState(): LeaseState | null {
    return this.#lease ? this.#lease.state : null;
  }

  *workers(): Iterable<StreamWorker> {
    for (const p of this.#pods.values()) yield* p.workers;
  }

  worker(podId: string): StreamWorker | undefined {
    for (const w of this.workers()) if (w.pod.podId === podId) return w;
    return undefined;
  }

  scraper(podId: string): MetricsScraper | null {
    return this.#pods.get(podId)?.scraper ?? null;
  }

  /**
   * With a lease: waits (standby) until every owned model's writer lease is ours, then follows the pods.
   * Their streams start by clearing each pod and rebuilding it from its replay buffer, so a takeover
   * replaces what the previous writer left; pods it does not follow are removed (#removeStale).
   */
  start(): Promise<void> {
    this.#started = this.#start();
    return this.#started;
  }

  async #start(): Promise<void> {
    if (this.#lease) {
      if (!(await this.#lease.acquire()) || this.#stopping) return;
      this.#lease.hold((lost, refused) => this.#leaseLost(lost, refused));
    }
    if (this.#stopping) return;
    await this.deps.discovery.start((pods) => void this.reconcile(pods));
    await this.#reconciling;
  }

  /** Brings the running pods in line with `pods` (serialized; the latest list wins). */
  reconcile(pods: readonly PodSpec[]): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.#stopping) return;
      const wanted = new Map(pods.filter((p) => this.#inShard(p.id)).map((p) => [p.id, p]));
      for (const [id, runner] of this.#pods) {
        const next = wanted.get(id);
        if (next && samePodSpec(next, runner.spec)) {
          this.#setReady(runner, next.ready !== false);
          continue;
        }
        this.#pods.delete(id);
        this.deps.log.info(
          next ? 'pod changed: restarting its streams' : 'pod left: removing it from the index',
          { pod: id },
        );
        await this.#remove(runner);
      }
      const keep = await this.#indexedNotReady([...wanted.values()]);
      for (const [id, spec] of wanted) {
        // A pod not ready and not in the index (a new one still loading) starts once it is ready; one an
        // earlier collector followed (a restart or takeover during a readiness flap) keeps its index.
        if (this.#pods.has(id) || (spec.ready === false && !keep.has(id))) continue;
        this.#pods.set(id, this.#startPod(spec));
        this.deps.log.info('pod added', {
          pod: id,
          address: spec.address,
          ranks: spec.dataParallelSize,
          ...(spec.ready === false ? { ready: false } : {}),
        });
      }
      await this.#removeStale();
    };
    this.#reconciling = this.#reconciling.then(run, run);
    return this.#reconciling;
  }

  /**
   * Of the listed pods that are not ready and not followed, those the index holds (left by an earlier
   * collector). With the index unreachable, all of them: following a pod costs little, losing its index more.
   */
  async #indexedNotReady(specs: readonly PodSpec[]): Promise<Set<string>> {
    const candidates = specs.filter((s) => s.ready === false && !this.#pods.has(s.id));
    if (candidates.length === 0) return new Set();
    const indexed = new Set<string>();
    try {
      for (const model of new Set(candidates.map((s) => s.model)))
        for (const p of await this.deps.index.listPods(model)) indexed.add(`${model}\u0000${p.podId}`);
    } catch {
      return new Set(candidates.map((s) => s.id));
    }
    return new Set(
      candidates
        .filter((s) => streamsOf(s).some((st) => indexed.has(`${s.model}\u0000${st.podId}`)))
        .map((s) => s.id),
    );
  }

  /**
   * Removes from the index the pods of the owned models that this collector does not run: a pod dropped
   * from the static list while the collector was down, a DP rank that no longer exists, a pod of a crashed
   * run. Left registered, such a pod keeps its last state (healthy, frozen load) and its blocks, and the
   * router keeps sending traffic to an address nobody follows. Runs inside the reconcile chain, so the set
   * of running pods cannot change under it; a failed check is retried until one succeeds.
   */
  async #removeStale(): Promise<void> {
    const models = this.deps.ownedModels ?? [];
    if (models.length === 0 || this.#stopping) return;
    if (this.#sweepRetry) clearTimeout(this.#sweepRetry);
    this.#sweepRetry = null;
    const running = new Set<string>();
    for (const w of this.workers()) running.add(`${w.pod.model}\u0000${w.pod.podId}`);
    try {
      for (const model of models)
        for (const p of await this.deps.index.listPods(model)) {
          if (running.has(`${model}\u0000${p.podId}`) || !this.#inShard(p.podId)) continue;
          if (this.#leaseGone) return;
          await this.deps.index.removePod({ model, podId: p.podId });
          this.deps.log.info('stale pod removed from the index: not among the pods this collector follows', {
            pod: p.podId,
            model,
            address: p.address,
          });
        }
      this.#sweepFailures = 0;
    } catch (err) {
      if (this.#writeRefused(err)) return;
      if (this.#sweepFailures++ === 0)
        this.deps.log.warn('could not check the index for stale pods; retrying', {
          retryInMs: STALE_SWEEP_RETRY_MS,
          err,
        });
      if (this.#stopping) return;
      this.#sweepRetry = setTimeout(() => {
        this.#sweepRetry = null;
        const sweep = (): Promise<void> => this.#removeStale();
        this.#reconciling = this.#reconciling.then(sweep, sweep);
      }, STALE_SWEEP_RETRY_MS);
      this.#sweepRetry.unref();
    }
  }

  /** Whether a pod (or an index pod id of one of its DP ranks) is this collector's to follow. */
  #inShard(podId: string): boolean {
    const s = this.deps.shard;
    return s === undefined || podShard(podId, s.count) === s.index;
  }

  health(): CollectorHealth {
    const lease = this.#lease?.view() ?? null;
    const standby = lease?.state === 'standby';
    const streams = [];
    const discoverySynced = this.deps.discovery.synced !== false;
    for (const p of this.#pods.values())
      for (const w of p.workers)
        streams.push({
          pod: w.pod.podId,
          lastSeq: w.lastSeq,
          resyncing: w.resyncing,
          queueOps: w.queue.queuedOps,
          writesSuspended: w.queue.suspended,
          healthy: p.scraper?.healthy ?? true,
          ready: p.ready,
        });
    return {
      // Not ready while it may not write (standing by, not yet sure with Redis unreachable at start, or lost)
      // or does not know its pods yet (a Kubernetes list refused).
      ok:
        !this.#stopping &&
        (lease === null || lease.state === 'held') &&
        discoverySynced &&
        streams.every((s) => !s.writesSuspended),
      stopping: this.#stopping,
      standby,
      discoverySynced,
      ...(standby && lease.heldBy[0] ? { holder: lease.heldBy[0].holder } : {}),
      ...(lease
        ? {
            writerLease: {
              state: lease.state,
              models: lease.models,
              heldBy: lease.heldBy.map((c) => ({ ...c })),
            },
          }
        : {}),
      streams,
    };
  }

  /**
   * Clean shutdown: stop discovery and subscribers, flush queued writes (bounded), then release the writer
   * lease (kept renewed during the flush, so a standby takes over only after the last write). Closes
   * nothing shared.
   */
  async stop(): Promise<boolean> {
    return this.#shutdown(this.settings.shutdown_timeout_ms);
  }

  async #shutdown(flushTimeoutMs: number): Promise<boolean> {
    this.#stopping = true;
    const deadline = Date.now() + flushTimeoutMs;
    if (this.#sweepRetry) clearTimeout(this.#sweepRetry);
    this.#sweepRetry = null;
    this.#lease?.stopAcquiring();
    await this.#started.catch(() => {}); // start()'s caller sees its error
    await this.deps.discovery.stop();
    await this.#reconciling;
    const runners = [...this.#pods.values()];
    this.#pods.clear();
    this.#draining.push(...runners);
    const flushed = await Promise.all(
      runners.map(async (r) => {
        await Promise.all([r.scraper?.stop(), r.models?.stop()]);
        const ok = await Promise.all(r.workers.map((w) => w.stop(flushTimeoutMs)));
        // Before the lease goes: the next holder's first step is to read them.
        if (this.settings.handoff && !this.#leaseGone)
          await Promise.all(r.workers.map((w) => w.saveHandoffAfterStop(deadline)));
        return ok.every(Boolean);
      }),
    );
    await this.#lease?.release();
    return flushed.every(Boolean);
  }

  /**
   * A write the index refused because another process holds the writer lease (the fence): the lease is
   * lost, even if no renewal has seen it yet. Returns false for any other error.
   */
  #writeRefused(err: unknown): boolean {
    if (!(err instanceof LeaseLostError)) return false;
    // Through the keeper, so that the loss is handled once whichever of renewal and fence comes first.
    if (this.#lease) this.#lease.lostByFence(err);
    else this.#leaseLost([{ model: err.model, holder: err.holder, expiresInMs: null }], err);
    return true;
  }

  /**
   * Another collector holds a lease that was ours (ours expired: this process or Redis stalled longer
   * than the TTL), found by a renewal or by the index refusing a write (`refused`). Everything it writes
   * now would count twice: drop every queued write and state patch at once, synchronously, then stop.
   * What was already sent is refused by the index's fence (run.ts fences it with the lease's holder value).
   */
  #leaseLost(lost: LeaseConflict[], refused: LeaseLostError | null): void {
    if (this.#leaseGone) return;
    this.#leaseGone = true;
    const first = lost[0]!.holder;
    this.deps.log.error(
      `writer lease lost to another collector, ${describeLeaseHolder(first)}: ` +
        `${refused ? 'the index refused a write (fenced); ' : ''}stopping at once, flushing nothing`,
      {
        models: lost.map((c) => c.model),
        holder: { id: first.id, host: first.host, pid: first.pid },
        detectedBy: refused ? 'fence' : 'renewal',
        ...(refused ? { err: refused } : {}),
      },
    );
    this.#stopping = true;
    for (const r of [...this.#pods.values(), ...this.#draining])
      for (const w of r.workers) {
        void w.queue.close();
        void w.writer.close();
      }
    void this.#shutdown(0);
    this.deps.onLeaseLost?.(lost);
  }

  #settings(model: string): StreamSettings {
    const s = this.settings;
    return {
      blockSize: this.deps.blockSizes[model] ?? 16,
      blockMapMaxEntries: s.block_map_max_entries,
      replayTimeoutMs: s.replay_timeout_ms,
      liveBufferBatches: s.live_buffer_batches,
      receiveHighWaterMark: s.zmq_receive_hwm,
      maxFrameBytes: s.zmq_max_frame_bytes,
      handoff: s.handoff,
      handoffCheckpointMs: s.handoff_checkpoint_ms,
      queue: {
        maxQueuedOps: s.max_queued_ops,
        maxOpsPerApply: s.max_ops_per_apply,
        retryMinMs: s.index_retry_min_ms,
        retryMaxMs: s.index_retry_max_ms,
      },
    };
  }

  #startPod(spec: PodSpec): PodRunner {
    const settings = this.#settings(spec.model);
    const observer = {
      applied: (
        w: StreamWorker,
        batches: readonly QueuedBatch[],
        appliedAtMs: number,
        applyMs: number,
      ): void => {
        // Only finite values reach prom-client, which throws on any other (issue #36): the decoder bounds ts,
        // and this guards what it cannot see (a clock, a bug).
        if (Number.isFinite(applyMs)) this.metrics.applySeconds.observe(Math.max(0, applyMs) / 1000);
        const lag = this.metrics.lag.labels({ pod: w.pod.podId });
        for (const b of batches) {
          const s = (appliedAtMs - b.tsMs) / 1000;
          if (b.seq >= 0 && Number.isFinite(s)) lag.observe(Math.max(0, s));
        }
        this.deps.onApplied?.(w.pod.podId, batches, appliedAtMs);
      },
      leaseLost: (_w: StreamWorker, err: LeaseLostError): void => void this.#writeRefused(err),
      // The engine may have restarted between the two collectors: its start time says so.
      processStartSec: (): number | null => runner.scraper?.lastPod?.processStartTimeSec ?? null,
      resumed: (w: StreamWorker, processStartSec: number | null): void => {
        if (processStartSec === null || !runner.scraper) return;
        const now = runner.scraper.noteEarlierStart(processStartSec);
        if (now !== null && now !== processStartSec) w.restartSignal(now);
      },
    };
    const workers = streamsOf(spec).map(
      (st) =>
        new StreamWorker(st, settings, this.deps.index, this.deps.log.child({ pod: st.podId }), observer),
    );
    const minTokens = Math.max(SILENT_STREAM_MIN_TOKENS, 8 * settings.blockSize);
    const runner: PodRunner = {
      spec,
      workers,
      silence: workers.map(() => new EventSilenceWatch(minTokens, SILENT_STREAM_REPEAT_MS)),
      scraper: null,
      models: null,
      scrapeOk: 0,
      scrapeFailed: 0,
      ready: spec.ready !== false,
    };
    if (spec.metrics) {
      runner.scraper = new MetricsScraper(
        {
          url: spec.metrics,
          intervalMs: this.settings.scrape_interval_ms,
          timeoutMs: this.settings.scrape_timeout_ms,
          unhealthyAfterFailures: this.settings.unhealthy_after_failures,
          expectedBlockSize: settings.blockSize,
          calibration: calibrationOptions(this.settings),
          ...(this.settings.calibration_pool
            ? { pool: { pools: this.#calibrationPools, model: spec.model, podId: spec.id } }
            : {}),
          log: this.deps.log.child({ pod: spec.id }),
          // The new start time lets a worker that already saw this restart in its event stream skip it.
          onRestart: () => {
            workers.forEach((w) => w.restartSignal(runner.scraper?.lastPod?.processStartTimeSec ?? null));
            runner.models?.refresh();
          },
          onScrape: (ok, pod) => {
            if (ok) runner.scrapeOk++;
            else runner.scrapeFailed++;
            if (ok && pod) this.#checkSilence(runner, pod);
          },
        },
        workers.map((w) => ({
          rank: w.spec.rank,
          write: (patch) =>
            w.writer.write({
              address: w.spec.address,
              ...patch,
              ...(runner.ready ? {} : { healthy: false }),
            }),
        })),
      );
    }
    const modelsUrl = spec.metrics ? modelsUrlOf(spec.metrics) : null;
    if (modelsUrl && this.settings.models_interval_ms > 0)
      runner.models = new ModelWindowReader({
        url: modelsUrl,
        model: spec.model,
        intervalMs: this.settings.models_interval_ms,
        timeoutMs: this.settings.scrape_timeout_ms,
        log: this.deps.log.child({ pod: spec.id }),
        // The server's window holds for each of its DP ranks.
        write: (maxModelLen) => {
          for (const w of workers) w.writer.write({ address: w.spec.address, maxModelLen });
        },
      });
    for (const w of workers) w.start({ healthy: runner.ready });
    runner.scraper?.start();
    runner.models?.start();
    return runner;
  }

  /**
   * A followed pod failing its readiness probe keeps its streams (and so its index, which stays exact)
   * but is written unhealthy until it is ready again, as the Service leaves it out of its endpoints. Back
   * ready, the next scrape writes its health (at once when it has no metrics).
   */
  #setReady(r: PodRunner, ready: boolean): void {
    if (r.ready === ready) return;
    r.ready = ready;
    if (ready) this.deps.log.info('pod ready again: back in routing', { pod: r.spec.id });
    else
      this.deps.log.warn('pod not ready: out of routing, its index kept while it is', {
        pod: r.spec.id,
        removedAfterMs: this.deps.discovery.notReadyGraceMs ?? null,
      });
    if (!ready || !r.scraper) for (const w of r.workers) w.writer.write({ healthy: ready });
  }

  /** Warns about a stream that hears nothing while its engine computes prompts (topic or endpoint wrong). */
  #checkSilence(r: PodRunner, pod: PodMetrics): void {
    r.workers.forEach((w, i) => {
      if (!w.spec.kvEvents) return;
      const computed = computedPromptTokens(engineView(pod, w.spec.rank));
      const watch = r.silence[i]!;
      const since = watch.computedSinceFrame(computed);
      const verdict = watch.observe(Date.now(), computed, w.stats.framesReceived);
      const log = this.deps.log.child({ pod: w.pod.podId });
      if (verdict === 'silent')
        log.warn(
          'no KV event received while the engine computed prompts: the index learns nothing from this pod',
          {
            endpoint: w.spec.kvEvents,
            topic: w.spec.topic,
            promptTokensComputedSince: since,
            check:
              `vLLM's --kv-events-config needs "enable_kv_cache_events": true, "publisher": "zmq", an "endpoint" ` +
              `bound on the port of ${w.spec.kvEvents}, and a "topic" equal to kv_events_topic ` +
              `(${JSON.stringify(w.spec.topic)} here; vLLM's default is "", and an empty kv_events_topic hears every topic); ` +
              `prefix caching must be on too (vLLM's default): without it vLLM publishes nothing`,
          },
        );
      else if (verdict === 'heard') log.info('KV events arriving now', { endpoint: w.spec.kvEvents });
    });
  }

  async #remove(r: PodRunner): Promise<void> {
    await Promise.all([r.scraper?.stop(), r.models?.stop()]);
    r.scraper?.leavePool();
    await Promise.all(r.workers.map((w) => w.stop(0)));
    // The other per-pod series are rebuilt from the running pods at each collect; this one is kept.
    for (const w of r.workers) this.metrics.lag.remove({ pod: w.pod.podId });
    for (const w of r.workers)
      await this.deps.index.removePod(w.pod).catch((err: unknown) => {
        if (!this.#writeRefused(err)) this.deps.log.error('removePod failed', { pod: w.pod.podId, err });
      });
  }

  *#scrapeViews(): Iterable<ScrapeView> {
    for (const p of this.#pods.values())
      if (p.scraper)
        yield {
          podId: p.spec.id,
          ok: p.scrapeOk,
          failed: p.scrapeFailed,
          healthy: p.scraper.healthy,
          blockSize: p.scraper.lastPod?.blockSize ?? null,
          numGpuBlocks: p.scraper.lastPod?.numGpuBlocks ?? null,
          maxModelLen: p.models?.maxModelLen ?? null,
          calibrations: p.scraper.targets.map((t, i) => ({
            rank: t.rank,
            calibration: p.scraper!.lastEstimates[i]?.calibration ?? null,
            prefillSource: p.scraper!.lastEstimates[i]?.prefillSource ?? null,
            written: p.scraper!.lastWritten[i]?.calibration ?? null,
            decodeSteps: p.scraper!.lastEstimates[i]?.decodeSteps ?? null,
            writtenDecodeSteps: p.scraper!.lastWritten[i]?.decodeSteps ?? null,
          })),
        };
  }
}
