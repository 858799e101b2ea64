import type { KvCacheEvent } from '../../../emulator/engine/types.js';
import type { KvEvent } from '../../../src/collector/events.js';
import { KeyMapper, newMapperCounters, type MapperCounters } from '../../../src/collector/key-mapper.js';
import type { VllmBlockHash } from '../../../src/core/types.js';
import type { KvIndex } from '../../../src/index/kv-index.js';
import type { SimPod } from './pod.js';

/**
 * The engine's KV events as the collector's decoder would hand them over (collector/events.ts domain
 * events): the fields the emulator publishes in vLLM's map encoding. The engine's hash is opaque to the
 * collector, exactly as vLLM's is.
 */
export function toCollectorEvents(events: readonly KvCacheEvent[]): KvEvent[] {
  return events.map((e): KvEvent => {
    switch (e.type) {
      case 'BlockStored':
        return {
          kind: 'stored',
          hashes: e.blockHashes as unknown as VllmBlockHash[],
          parent: e.parentBlockHash as unknown as VllmBlockHash | null,
          tokenIds: e.tokenIds,
          blockSize: e.blockSize,
          loraName: e.loraName,
          loraNameMissing: false,
          tier: 'GPU',
          extraKeys: e.extraKeys.map((x) => (x === null ? null : { strings: [...x], opaque: false })),
          groupIdx: 0,
          specKind: 'full_attention',
        };
      case 'BlockRemoved':
        return {
          kind: 'removed',
          hashes: e.blockHashes as unknown as VllmBlockHash[],
          tier: 'GPU',
          groupIdx: 0,
        };
      case 'AllBlocksCleared':
        return { kind: 'cleared' };
    }
  });
}

/**
 * The collector's write path in virtual time: per-pod KeyMapper (our keys from token_ids, chained through
 * the vLLM-hash → key map) → index.apply, plus the metrics scrape → upsertPodState. The router reads only
 * this index, so it sees what a real deployment sees: KV events after the event-path delay, load only as
 * of the last scrape.
 */
export class CollectorFeed {
  readonly #mappers = new Map<string, KeyMapper>();
  readonly counters: MapperCounters = newMapperCounters();

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
    const ops = m.toOps(toCollectorEvents(events), this.counters);
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
        meanQueuedPrefillTokens: pod.takeMeanQueuedPrefill(),
        lastScrapeAtMs: nowMs,
        healthy: true,
      },
    );
  }
}
