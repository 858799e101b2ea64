// The collector specs' harness: a collector with fast settings, vLLM chains published, waits on the index.
import { Collector } from '../../../src/collector/collector.js';
import { StaticDiscovery } from '../../../src/collector/discovery/static.js';
import { silentLogger, createLogger } from '../../../src/collector/logger.js';
import type { StreamWorker } from '../../../src/collector/stream-worker.js';
import { CollectorSectionSchema, type CollectorSection } from '../../../src/config/collector-section.js';
import type { PodConfig } from '../../../src/config/fleet-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import type { KvIndex } from '../../../src/index/index.js';
import { waitFor } from '../ports.js';
import type { FakeVllmPublisher } from './fake-publisher.js';
import type { EventSpec } from './vllm-frames.js';

export const MODEL = 'Qwen/Qwen3-8B';
export const BS = 16;

/** Collector settings for tests: schema defaults, fast timers. Overrides may go below schema minimums. */
export function testSettings(over: Partial<CollectorSection> = {}): CollectorSection {
  return {
    ...validateConfig(CollectorSectionSchema, { listen: '127.0.0.1:0' }, 'test'),
    scrape_interval_ms: 50,
    scrape_timeout_ms: 500,
    replay_timeout_ms: 2000,
    index_retry_min_ms: 20,
    index_retry_max_ms: 200,
    shutdown_timeout_ms: 2000,
    ...over,
  };
}

export function startCollector(
  index: KvIndex,
  pods: PodConfig[],
  over: Partial<CollectorSection> = {},
): Collector {
  const log = process.env.KINF_TEST_LOG ? createLogger('debug') : silentLogger;
  const c = new Collector(testSettings(over), {
    index,
    discovery: new StaticDiscovery(pods),
    log,
    blockSizes: { [MODEL]: BS },
  });
  return c;
}

/** Publishes empty probe batches until the collector has ingested one (ZMQ slow joiner; never a sleep). */
export async function waitSubscribed(
  pub: FakeVllmPublisher,
  worker: () => StreamWorker | undefined,
): Promise<void> {
  // 20 s: a SUB's first connection, its replay and the first batch took over 10 s on a host at load 8-9.
  await waitFor(
    'collector subscribed',
    async () => {
      const w = worker();
      if (w && w.stats.batches > 0 && !w.resyncing) return true;
      await pub.publish([]);
      return false;
    },
    20_000,
  );
}

/** How many leading blocks of `tokens` the index credits to `podId` on GPU (router-side keys). */
export async function cachedBlocks(
  index: KvIndex,
  podId: string,
  tokens: number[],
  opts: { lora?: string; salt?: string } = {},
): Promise<number> {
  const keys = blockKeys(
    tokens,
    BS,
    keySeed({ model: MODEL, lora: opts.lora ?? null, cacheSalt: opts.salt ?? null }),
  );
  const r = await index.lookup(MODEL, keys);
  return r.pods.find((p) => p.state.podId === podId)?.prefixBlocks.GPU ?? 0;
}

export async function waitCached(
  index: KvIndex,
  podId: string,
  tokens: number[],
  blocks: number,
  opts: { lora?: string; salt?: string } = {},
): Promise<void> {
  await waitFor(
    `${podId} caches ${blocks} blocks`,
    async () => (await cachedBlocks(index, podId, tokens, opts)) === blocks,
    20_000,
  );
}

let next = 1;
/** Distinct token ids per call, so tests never share prefixes by accident. */
export function freshTokens(blocks: number): number[] {
  const base = next;
  next += blocks * BS;
  return Array.from({ length: blocks * BS }, (_, i) => base + i);
}

/** Fresh vLLM block hashes counting up from `start` (a spec picks its own range; above 2^63 tests bigint chaining). */
export function hashCounter(start: bigint): (n: number) => bigint[] {
  let next = start;
  return (n) => Array.from({ length: n }, () => next++);
}

/** vLLM's BlockStored for blocks `hashes` of `tokens` after `parent` (null: from block 0), block size BS. */
export function blockStored(
  hashes: bigint[],
  parent: bigint | null,
  tokens: number[],
  extra: Partial<EventSpec> = {},
): EventSpec {
  return { type: 'BlockStored', hashes, parent, tokens, blockSize: BS, ...extra } as EventSpec;
}

/**
 * Publishes a fresh chain of `n` blocks, one BlockStored per batch (each block's parent the one before), as an
 * engine that computes a prompt block by block; returns its tokens and hashes.
 */
export async function publishChain(
  pub: FakeVllmPublisher,
  n: number,
  nextHashes: (n: number) => bigint[],
): Promise<{ t: number[]; h: bigint[] }> {
  const t = freshTokens(n);
  const h = nextHashes(n);
  for (let i = 0; i < n; i++)
    await pub.publish([blockStored([h[i]!], i === 0 ? null : h[i - 1]!, t.slice(i * BS, (i + 1) * BS))]);
  return { t, h };
}
