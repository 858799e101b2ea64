import type { KvCacheEvent } from '../../../emulator/engine/types.js';
import { encodeKvEventBatch } from '../../../emulator/wire/kv-event-batch.js';
import { KeyMapper, newMapperCounters, type MapperCounters } from '../../../src/collector/key-mapper.js';
import { parseVllmBatch } from '../../../src/collector/wire/vllm-events.js';
import type { KvIndex } from '../../../src/index/kv-index.js';
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
  decodeErrors = 0;

  constructor(
    readonly index: KvIndex,
    readonly model: string,
    readonly blockSize: number,
  ) {}

  async register(pod: SimPod, nowMs: number): Promise<void> {
    await this.index.upsertPodState(
      { model: this.model, podId: pod.id },
      { address: pod.address, healthy: true, lastScrapeAtMs: nowMs },
    );
  }

  async applyKvBatch(podId: string, events: readonly KvCacheEvent[], nowMs: number): Promise<void> {
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
    await this.index.upsertPodState(
      { model: this.model, podId: pod.id },
      {
        running: pod.engine.numRunning,
        waiting: pod.engine.numWaiting,
        kvUsage: pod.engine.kvUsage,
        kvCapacityTokens: pod.engine.numGpuBlocks * pod.engine.blockSize,
        meanQueuedPrefillTokens: pod.takeMeanQueuedPrefill(),
        lastScrapeAtMs: nowMs,
        healthy: true,
      },
    );
  }
}
