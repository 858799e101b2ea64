import type { Logger } from '../logger.js';
import type { PodStatePatch } from '../ops/pod-state-writer.js';
import { CalibrationEstimator, type CalibrationOptions, type Estimate } from './calibration.js';
import { calibrationGroup, type CalibrationPools, type Shared } from './calibration-pool.js';
import { parsePromText } from './prom-text.js';
import {
  engineKvCapacity,
  engineView,
  extractVllmMetrics,
  viewKvCapacity,
  type PodMetrics,
} from './vllm-metrics.js';

/** Where one rank's scraped state goes (its PodStateWriter). */
export interface ScrapeTarget {
  rank: number | null;
  write(patch: PodStatePatch): void;
}

export interface ScraperOptions {
  url: string;
  intervalMs: number;
  timeoutMs: number;
  unhealthyAfterFailures: number;
  /** Block size the router is configured with; a pod reporting another one is logged. */
  expectedBlockSize: number;
  calibration: CalibrationOptions;
  /**
   * Like pods share a calibration and decode steps (collector setting calibration_pool); absent: each pod
   * keeps its own.
   */
  pool?: { pools: CalibrationPools; model: string; podId: string };
  log: Logger;
  /** process_start_time_seconds changed: the server restarted (a backup for sequence-based detection). */
  onRestart(): void;
  onScrape(ok: boolean, pod: PodMetrics | null): void;
}

/**
 * Polls one pod's /metrics: load (running, waiting, KV usage), queued prefill work and calibration per DP
 * rank, written with a timestamp. K consecutive failures mark the pod unhealthy; one success restores it.
 */
export class MetricsScraper {
  readonly #estimators: CalibrationEstimator[];
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  #inFlight: Promise<boolean> | null = null;
  #lastStart: number | null = null;
  #warnedBlockSize = false;
  consecutiveFailures = 0;
  healthy = true;
  lastPod: PodMetrics | null = null;
  /** Per target (DP rank), the calibration estimate of the last scrape; null before one. */
  readonly lastEstimates: (Estimate | null)[];
  /** Per target, the calibration and decode steps last written (pooled or own); null before a scrape. */
  readonly lastWritten: (Shared | null)[];

  constructor(
    readonly opts: ScraperOptions,
    readonly targets: readonly ScrapeTarget[],
  ) {
    this.#estimators = targets.map(() => new CalibrationEstimator(opts.calibration));
    this.lastEstimates = targets.map(() => null);
    this.lastWritten = targets.map(() => null);
  }

  start(): void {
    const tick = (): void => {
      if (this.#stopped) return;
      this.#inFlight = this.scrapeOnce();
      void this.#inFlight.finally(() => {
        this.#inFlight = null;
        if (!this.#stopped) this.#timer = setTimeout(tick, this.opts.intervalMs);
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#inFlight;
  }

  async scrapeOnce(): Promise<boolean> {
    let pod: PodMetrics;
    try {
      const res = await fetch(this.opts.url, { signal: AbortSignal.timeout(this.opts.timeoutMs) });
      const text = await res.text();
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      pod = extractVllmMetrics(parsePromText(text));
      if (pod.engines.size === 0) throw new Error('no vllm:* series in the response');
    } catch (err) {
      this.#failed(err);
      return false;
    }
    const now = Date.now();
    this.lastPod = pod;
    this.consecutiveFailures = 0;
    if (!this.healthy) this.opts.log.info('metrics scrape succeeded again: pod healthy');
    this.healthy = true;

    if (pod.processStartTimeSec !== null) {
      if (this.#lastStart !== null && pod.processStartTimeSec !== this.#lastStart) {
        this.opts.log.warn('process start time changed: pod restarted', {
          was: this.#lastStart,
          now: pod.processStartTimeSec,
        });
        this.opts.onRestart();
      }
      this.#lastStart = pod.processStartTimeSec;
    }
    if (pod.blockSize !== null && pod.blockSize !== this.opts.expectedBlockSize && !this.#warnedBlockSize) {
      this.#warnedBlockSize = true;
      this.opts.log.warn(
        'pod block size differs from the configured block_size: its blocks will not be indexed',
        {
          pod_block_size: pod.blockSize,
          block_size: this.opts.expectedBlockSize,
        },
      );
    }

    this.targets.forEach((t, i) => {
      const m = engineView(pod, t.rank);
      const patch: PodStatePatch = { healthy: true, lastScrapeAtMs: now };
      const kv = engineKvCapacity(pod, this.opts.expectedBlockSize);
      if (kv !== null) patch.kvCapacityTokens = kv;
      if (m !== null) {
        if (m.running !== null) patch.running = m.running;
        if (m.waiting !== null) patch.waiting = m.waiting;
        if (m.kvUsage !== null) patch.kvUsage = m.kvUsage;
        const est = this.#estimators[i]!.add(
          now,
          m,
          viewKvCapacity(pod, t.rank, this.opts.expectedBlockSize),
        );
        this.lastEstimates[i] = est;
        if (est.meanUncachedTokens !== null) patch.meanQueuedPrefillTokens = est.meanUncachedTokens;
        const written = this.#shared(t.rank, est, pod);
        this.lastWritten[i] = written;
        if (written.calibration !== null) patch.calibration = written.calibration;
        if (written.decodeSteps !== null) patch.decodeSteps = written.decodeSteps;
      }
      t.write(patch);
    });
    this.opts.onScrape(true, pod);
    return true;
  }

  /** What a rank writes of its estimates: its group's when pooling, else its own. */
  #shared(rank: number | null, own: Shared, pod: PodMetrics): Shared {
    const p = this.opts.pool;
    if (!p) return own;
    const group = calibrationGroup(p.model, pod.numGpuBlocks, pod.blockSize);
    return p.pools.share(memberKey(p.podId, rank), group, own);
  }

  /** Leaves the pool (the pod is gone). */
  leavePool(): void {
    const p = this.opts.pool;
    if (p) for (const t of this.targets) p.pools.remove(memberKey(p.podId, t.rank));
  }

  #failed(err: unknown): void {
    this.consecutiveFailures++;
    this.opts.onScrape(false, null);
    if (this.consecutiveFailures === 1)
      this.opts.log.warn('metrics scrape failed', { url: this.opts.url, err });
    if (this.healthy && this.consecutiveFailures >= this.opts.unhealthyAfterFailures) {
      this.healthy = false;
      this.opts.log.error('pod unhealthy: metrics scrapes keep failing', {
        failures: this.consecutiveFailures,
      });
      for (const t of this.targets) t.write({ healthy: false });
    }
  }
}

const memberKey = (podId: string, rank: number | null): string => `${podId}#${rank ?? ''}`;
