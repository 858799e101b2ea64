import type { CollectorSection } from '../config/collector-section.js';
import type { KvIndex } from '../index/kv-index.js';
import { CollectorMetrics, type ScrapeView } from './collector-metrics.js';
import type { Discovery } from './discovery/discovery.js';
import type { Logger } from './logger.js';
import { calibrationOptions } from './metrics/calibration.js';
import { CalibrationPools } from './metrics/calibration-pool.js';
import { MetricsScraper } from './metrics/scraper.js';
import type { QueuedBatch } from './ops/apply-queue.js';
import { samePodSpec, streamsOf, type PodSpec } from './pods.js';
import { StreamWorker, type StreamSettings } from './stream-worker.js';

/** Called after each index write with the batches it covered (benchmarks measure lag with it). */
export type AppliedListener = (podId: string, batches: readonly QueuedBatch[], appliedAtMs: number) => void;

export interface CollectorDeps {
  index: KvIndex;
  discovery: Discovery;
  log: Logger;
  /** Block size the router uses, per model (fleet `models.<name>.block_size`). */
  blockSizes: Record<string, number>;
  onApplied?: AppliedListener;
}

interface PodRunner {
  spec: PodSpec;
  workers: StreamWorker[];
  scraper: MetricsScraper | null;
  scrapeOk: number;
  scrapeFailed: number;
}

export interface CollectorHealth {
  ok: boolean;
  stopping: boolean;
  streams: {
    pod: string;
    lastSeq: number | null;
    resyncing: boolean;
    queueOps: number;
    writesSuspended: boolean;
    healthy: boolean;
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

  constructor(
    readonly settings: CollectorSection,
    readonly deps: CollectorDeps,
  ) {
    this.metrics = new CollectorMetrics(
      () => this.workers(),
      () => this.#scrapeViews(),
    );
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

  async start(): Promise<void> {
    await this.deps.discovery.start((pods) => void this.reconcile(pods));
    await this.#reconciling;
  }

  /** Brings the running pods in line with `pods` (serialized; the latest list wins). */
  reconcile(pods: readonly PodSpec[]): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.#stopping) return;
      const wanted = new Map(pods.map((p) => [p.id, p]));
      for (const [id, runner] of this.#pods) {
        const next = wanted.get(id);
        if (next && samePodSpec(next, runner.spec)) continue;
        this.#pods.delete(id);
        this.deps.log.info(
          next ? 'pod changed: restarting its streams' : 'pod left: removing it from the index',
          { pod: id },
        );
        await this.#remove(runner);
      }
      for (const [id, spec] of wanted) {
        if (this.#pods.has(id)) continue;
        this.#pods.set(id, this.#startPod(spec));
        this.deps.log.info('pod added', { pod: id, address: spec.address, ranks: spec.dataParallelSize });
      }
    };
    this.#reconciling = this.#reconciling.then(run, run);
    return this.#reconciling;
  }

  health(): CollectorHealth {
    const streams = [];
    for (const p of this.#pods.values())
      for (const w of p.workers)
        streams.push({
          pod: w.pod.podId,
          lastSeq: w.lastSeq,
          resyncing: w.resyncing,
          queueOps: w.queue.queuedOps,
          writesSuspended: w.queue.suspended,
          healthy: p.scraper?.healthy ?? true,
        });
    return {
      ok: !this.#stopping && streams.every((s) => !s.writesSuspended),
      stopping: this.#stopping,
      streams,
    };
  }

  /** Clean shutdown: stop discovery and subscribers, flush queued writes (bounded), close nothing shared. */
  async stop(): Promise<boolean> {
    this.#stopping = true;
    await this.deps.discovery.stop();
    await this.#reconciling;
    const runners = [...this.#pods.values()];
    this.#pods.clear();
    const flushed = await Promise.all(
      runners.map(async (r) => {
        await r.scraper?.stop();
        const ok = await Promise.all(r.workers.map((w) => w.stop(this.settings.shutdown_timeout_ms)));
        return ok.every(Boolean);
      }),
    );
    return flushed.every(Boolean);
  }

  #settings(model: string): StreamSettings {
    const s = this.settings;
    return {
      blockSize: this.deps.blockSizes[model] ?? 16,
      blockMapMaxEntries: s.block_map_max_entries,
      replayTimeoutMs: s.replay_timeout_ms,
      liveBufferBatches: s.live_buffer_batches,
      receiveHighWaterMark: s.zmq_receive_hwm,
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
        this.metrics.applySeconds.observe(applyMs / 1000);
        const lag = this.metrics.lag.labels({ pod: w.pod.podId });
        for (const b of batches) if (b.seq >= 0) lag.observe(Math.max(0, appliedAtMs - b.tsMs) / 1000);
        this.deps.onApplied?.(w.pod.podId, batches, appliedAtMs);
      },
    };
    const workers = streamsOf(spec).map(
      (st) =>
        new StreamWorker(st, settings, this.deps.index, this.deps.log.child({ pod: st.podId }), observer),
    );
    const runner: PodRunner = { spec, workers, scraper: null, scrapeOk: 0, scrapeFailed: 0 };
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
          onRestart: () => workers.forEach((w) => w.restartSignal()),
          onScrape: (ok) => (ok ? runner.scrapeOk++ : runner.scrapeFailed++),
        },
        workers.map((w) => ({
          rank: w.spec.rank,
          write: (patch) => w.writer.write({ address: w.spec.address, ...patch }),
        })),
      );
    }
    for (const w of workers) w.start({ healthy: true });
    runner.scraper?.start();
    return runner;
  }

  async #remove(r: PodRunner): Promise<void> {
    await r.scraper?.stop();
    r.scraper?.leavePool();
    await Promise.all(r.workers.map((w) => w.stop(0)));
    for (const w of r.workers)
      await this.deps.index
        .removePod(w.pod)
        .catch((err: unknown) => this.deps.log.error('removePod failed', { pod: w.pod.podId, err }));
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
