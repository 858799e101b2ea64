// Polls one pod's vLLM /metrics: load, queued prefill work, calibration and health, per DP rank.
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
  type EngineMetrics,
  type PodMetrics,
} from './vllm-metrics.js';

/**
 * The series the router's load model reads, per rank (vLLM's names; deprecated aliases accepted). A scrape
 * without one leaves that part of the pod's load unknown: rather than let the last value look fresh, the
 * rank is marked unhealthy (the router then prefers other pods) and its lastScrapeAtMs is not advanced.
 */
export const LOAD_SERIES: readonly (readonly [keyof EngineMetrics, string])[] = [
  ['running', 'vllm:num_requests_running'],
  ['waiting', 'vllm:num_requests_waiting'],
  ['kvUsage', 'vllm:kv_cache_usage_perc'],
];

/** The LOAD_SERIES a rank's view lacks (all of them when the scrape has no engine for the rank). */
export function missingLoadSeries(m: EngineMetrics | null): string[] {
  return LOAD_SERIES.filter(([field]) => m === null || m[field] === null).map(([, name]) => name);
}

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
 * rank, written with a timestamp. K consecutive failures mark the pod unhealthy; one success restores it. A
 * scrape that answers but lacks a load series (LOAD_SERIES) marks that rank unhealthy until it returns.
 */
export class MetricsScraper {
  readonly #estimators: CalibrationEstimator[];
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  #inFlight: Promise<boolean> | null = null;
  #lastStart: number | null = null;
  #warnedBlockSize = false;
  #warnedNoPrefixCaching = false;
  /** unhealthy_after_failures scrapes in a row failed. */
  #unreachable = false;
  /** Per target: the load series its last scrape lacked (empty: none). */
  readonly #missing: string[][];
  consecutiveFailures = 0;
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
    this.#missing = targets.map(() => []);
  }

  /** False while scrapes keep failing, or while a rank's scrape lacks the series its load comes from. */
  get healthy(): boolean {
    return !this.#unreachable && this.#missing.every((m) => m.length === 0);
  }

  /** The load series each rank's last scrape lacked, by target. */
  get missingSeries(): readonly (readonly string[])[] {
    return this.#missing;
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

  /**
   * The process start time a previous collector saw (its handoff): until a scrape finds one, the first that
   * finds another is a restart. Returns the start time a scrape already found, else null.
   */
  noteEarlierStart(sec: number): number | null {
    if (this.#lastStart !== null) return this.#lastStart;
    this.#lastStart = sec;
    return null;
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
    if (this.#unreachable) this.opts.log.info('metrics scrape succeeded again');
    this.#unreachable = false;

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

    if (pod.prefixCaching === false && !this.#warnedNoPrefixCaching) {
      this.#warnedNoPrefixCaching = true;
      this.opts.log.warn(
        'prefix caching is off on this pod: it reuses no cached prompt and publishes no KV events, so routing cannot help it',
        {
          url: this.opts.url,
          check: 'start vLLM without --no-enable-prefix-caching (prefix caching is on by default)',
        },
      );
    } else if (pod.prefixCaching === true) this.#warnedNoPrefixCaching = false;

    this.targets.forEach((t, i) => {
      const m = engineView(pod, t.rank);
      const missing = missingLoadSeries(m);
      this.#noteMissing(i, t.rank, missing);
      // Fresh only when the whole load is: otherwise the old values stay, marked stale and unhealthy.
      const patch: PodStatePatch =
        missing.length === 0 ? { healthy: true, lastScrapeAtMs: now } : { healthy: false };
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

  /** Logs when a rank's set of missing load series changes (once, not every scrape). */
  #noteMissing(i: number, rank: number | null, missing: string[]): void {
    const was = this.#missing[i]!;
    if (was.length === missing.length && was.every((n, k) => n === missing[k])) return;
    this.#missing[i] = missing;
    const where = rank === null ? {} : { rank };
    if (missing.length > 0)
      this.opts.log.warn(
        'pod /metrics lack series the router needs: load unknown, pod marked unhealthy until they return',
        {
          ...where,
          missing,
          url: this.opts.url,
          hint: 'a vLLM version that renamed or dropped them, a proxy filtering /metrics, or not a vLLM server',
        },
      );
    else this.opts.log.info('pod /metrics carry the load series again: pod healthy', where);
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
    if (!this.#unreachable && this.consecutiveFailures >= this.opts.unhealthyAfterFailures) {
      this.#unreachable = true;
      this.opts.log.error('pod unhealthy: metrics scrapes keep failing', {
        failures: this.consecutiveFailures,
      });
      for (const t of this.targets) t.write({ healthy: false });
    }
  }
}

const memberKey = (podId: string, rank: number | null): string => `${podId}#${rank ?? ''}`;
