// CollectorFeed: the collector's write path in virtual time, the emulator's KV events into the index.
import type { KvCacheEvent } from '../../../emulator/engine/types.js';
import { encodeKvEventBatch } from '../../../emulator/wire/kv-event-batch.js';
import { KeyMapper, newMapperCounters, type MapperCounters } from '../../../src/collector/key-mapper.js';
import {
  CalibrationEstimator,
  calibrationOptions,
  type CalibrationOptions,
} from '../../../src/collector/metrics/calibration.js';
import { CalibrationPools, calibrationGroup } from '../../../src/collector/metrics/calibration-pool.js';
import { parsePromText } from '../../../src/collector/metrics/prom-text.js';
import {
  engineView,
  extractVllmMetrics,
  viewKvCapacity,
} from '../../../src/collector/metrics/vllm-metrics.js';
import { parseVllmBatch } from '../../../src/collector/wire/vllm-events.js';
import { CollectorSectionSchema } from '../../../src/config/collector-section.js';
import { validateConfig } from '../../../src/config/validate.js';
import type { KvIndex, PodStatePatch } from '../../../src/index/index.js';
import type { SimPod } from './pod.js';

/**
 * The collector's write path in virtual time: each step's KV events are encoded exactly as the emulator
 * publishes them (vLLM's msgpack map encoding, uint64 hashes), decoded by the collector's wire decoder,
 * then the per-pod KeyMapper (our keys from token_ids, chained through
 * the vLLM-hash → key map) → index.apply, plus the metrics scrape → upsertPodState. The router reads only
 * this index, so it sees what a real deployment sees: KV events after the event-path delay, load only as
 * of the last scrape.
 */
export class CollectorFeed {
  readonly #mappers = new Map<string, KeyMapper>();
  readonly counters: MapperCounters = newMapperCounters();
  /** Each pod's last `replayBatches` event batches, as its vLLM replay buffer (buffer_steps) holds them. */
  readonly #buffers = new Map<string, (readonly KvCacheEvent[])[]>();
  /** Batches each pod has published (a batch is published only for a step with events, as vLLM does). */
  readonly #published = new Map<string, number>();
  decodeErrors = 0;

  /** Per pod, when the feed calibrates from /metrics as the collector does. */
  readonly #estimators = new Map<string, CalibrationEstimator>();
  /** The collector's default settings, when calibrating. */
  readonly #calibration: CalibrationOptions | null;
  /** Like pods' shared calibration, when the collector's default pools it. */
  readonly #pools: CalibrationPools | null;

  /**
   * `calibrate`: each scrape renders the pod's vLLM /metrics text and runs it through the collector's own
   * parser and CalibrationEstimator (collector defaults), so the router gets the per-pod calibration and
   * queued-prefill estimate a live collector writes (pooled over like pods, the collector's default);
   * otherwise the router keeps the profile's defaults. `replayBatches`: keep that many of each pod's last
   * batches for `restart` (null: keep none, no restart).
   */
  constructor(
    readonly index: KvIndex,
    readonly model: string,
    readonly blockSize: number,
    readonly calibrate = false,
    readonly replayBatches: number | null = null,
  ) {
    const settings = validateConfig(CollectorSectionSchema, {}, 'collector defaults');
    this.#calibration = calibrate ? calibrationOptions(settings) : null;
    this.#pools = calibrate && settings.calibration_pool ? new CalibrationPools() : null;
  }

  readonly #registered: string[] = [];

  async register(pod: SimPod, nowMs: number): Promise<void> {
    this.#registered.push(pod.id);
    if (this.#calibration) {
      pod.enableMetrics(this.model);
      this.#estimators.set(pod.id, new CalibrationEstimator(this.#calibration));
    }
    await this.index.upsertPodState(
      { model: this.model, podId: pod.id },
      { address: pod.address, healthy: true, lastScrapeAtMs: nowMs },
    );
  }

  async applyKvBatch(podId: string, events: readonly KvCacheEvent[], nowMs: number): Promise<void> {
    if (this.replayBatches !== null && events.length > 0) {
      let buf = this.#buffers.get(podId);
      if (!buf) this.#buffers.set(podId, (buf = []));
      buf.push(events);
      if (buf.length > this.replayBatches) buf.shift();
      this.#published.set(podId, (this.#published.get(podId) ?? 0) + 1);
    }
    await this.#ingest(podId, events, nowMs);
  }

  /**
   * A collector (re)start: each pod is cleared, its KeyMapper forgotten, and rebuilt from its replay buffer;
   * partialSinceMs as the collector's stream worker sets it (0 only when the buffer still holds the first batch).
   */
  async restart(nowMs: number): Promise<void> {
    if (this.replayBatches === null) throw new Error('CollectorFeed.restart needs replayBatches');
    for (const podId of this.#registered) {
      const ref = { model: this.model, podId };
      await this.index.apply(ref, [{ op: 'clear' }]);
      this.#mappers.delete(podId);
      const buf = this.#buffers.get(podId) ?? [];
      for (const events of buf) await this.#ingest(podId, events, nowMs);
      const complete = (this.#published.get(podId) ?? 0) === buf.length;
      await this.index.upsertPodState(ref, { partialSinceMs: complete ? 0 : nowMs });
    }
  }

  async #ingest(podId: string, events: readonly KvCacheEvent[], nowMs: number): Promise<void> {
    let m = this.#mappers.get(podId);
    if (!m) this.#mappers.set(podId, (m = new KeyMapper(this.model, this.blockSize, 1_000_000)));
    const parsed = parseVllmBatch(encodeKvEventBatch(nowMs / 1000, events, { format: 'map' }));
    if (!parsed.ok) {
      this.decodeErrors++;
      return;
    }
    const ops = m.toOps(parsed.batch.events, this.counters);
    const ref = { model: this.model, podId };
    if (ops.length) await this.index.apply(ref, ops);
    await this.index.upsertPodState(ref, { lastEventAtMs: nowMs });
  }

  /** What a /metrics scrape gives the collector (vllm:num_requests_running/waiting, kv_cache_usage_perc). */
  async scrape(pod: SimPod, nowMs: number): Promise<void> {
    const patch: PodStatePatch = {
      running: pod.engine.numRunning,
      waiting: pod.engine.numWaiting,
      kvUsage: pod.engine.kvUsage,
      kvCapacityTokens: pod.engine.numGpuBlocks * pod.engine.blockSize,
      meanQueuedPrefillTokens: pod.takeMeanQueuedPrefill(),
      lastScrapeAtMs: nowMs,
      healthy: true,
    };
    const est = this.#estimators.get(pod.id);
    if (est && pod.metrics) {
      const metrics = extractVllmMetrics(parsePromText(await pod.metrics.render()));
      const m = engineView(metrics, null);
      if (m) {
        const e = est.add(nowMs, m, viewKvCapacity(metrics, null, this.blockSize));
        if (e.meanUncachedTokens !== null) patch.meanQueuedPrefillTokens = e.meanUncachedTokens;
        const group = calibrationGroup(this.model, metrics.numGpuBlocks, metrics.blockSize);
        const written = this.#pools ? this.#pools.share(pod.id, group, e) : e;
        if (written.calibration !== null) patch.calibration = written.calibration;
        if (written.decodeSteps !== null) patch.decodeSteps = written.decodeSteps;
      }
    }
    await this.index.upsertPodState({ model: this.model, podId: pod.id }, patch);
  }
}
