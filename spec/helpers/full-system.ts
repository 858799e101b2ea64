// Starts the whole system for end-to-end specs: emulated pods, collector, Redis, plugin behind Kong.
import { afterAll } from 'vitest';
import type { Gateway, GatewayOptions } from '../../kong/stand-in/index.js';
import type { EmulatorSection } from '../../src/config/emulator-section.js';
import type { Collector } from '../../src/collector/collector.js';
import { type KvIndex } from '../../src/index/index.js';
import { pluginConfigFromFleet } from '../../src/router/from-fleet.js';
import { MODEL, startTestFleet, type TestFleet } from '../02-integration/emulator/emulator-fleet.js';
import { startSseUpstream, type SseUpstream } from '../02-integration/kong/test-servers.js';
import { buildPlugin, startPluginGateway, type BuiltPlugin } from '../02-integration/plugin/harness.js';
import { startCollector } from './collector/collector-harness.js';
import { waitPluginWarm } from './plugin-warm-up.js';
import { waitFor } from './ports.js';
import { startIndexRedis, type IndexRedis } from './redis-cluster.js';
import { observerIndex } from './observer-index.js';

/** The whole system, nothing faked: emulated pods → collector → Redis → the plugin behind the Kong stand-in. */
export interface FullSystem {
  /** The index's Redis: a private redis-server, or with `redisCluster` the seed node of a 3-shard Cluster. */
  redis: IndexRedis;
  fleet: TestFleet;
  index: KvIndex;
  collector: Collector;
  plugin: BuiltPlugin;
  /** The route's service url (where a request goes when the plugin leaves Kong's target). */
  service: SseUpstream;
  gw: Gateway;
  pluginConfig: Record<string, unknown>;
  close(): Promise<void>;
}

/**
 * Systems started in this spec file and not closed yet, those still starting included. A `beforeAll` that
 * times out leaves its start running with no `sys` for `afterAll` to close: this file's own `afterAll`
 * stops them all, and a start still under way stops at its next step and closes what it had started.
 */
const live = new Set<{ close(): Promise<void>; abandon(): void; settled: Promise<void> }>();
afterAll(async () => {
  for (const s of [...live]) {
    s.abandon();
    await s.close();
    // The file's process may exit after this hook: a start under way must close what it starts meanwhile.
    await s.settled;
  }
});

/**
 * Starts emulated pods (3 unless `opts.pods`), the collector on a private Redis, and the gateway with
 * `pluginExtra` merged in.
 */
export async function startFullSystem(
  keyPrefix: string,
  pluginExtra: Record<string, unknown> = {},
  opts: {
    pods?: number;
    emulator?: Partial<EmulatorSection>;
    redisCluster?: boolean;
    /** Merged into each pod's fleet entry (e.g. data_parallel_size). */
    podExtra?: Record<string, unknown>;
    /** Merged into the gateway's options (e.g. onEvent, to read each decision's upstream headers). */
    gateway?: Partial<GatewayOptions>;
  } = {},
): Promise<FullSystem> {
  const n = opts.pods ?? 3;
  // One index entry per DP rank.
  const entries = n * Number(opts.podExtra?.data_parallel_size ?? 1);
  // Stopped in reverse order, also when a later step fails.
  const closers: (() => unknown)[] = [];
  let abandoned = false;
  const close = async (): Promise<void> => {
    live.delete(entry);
    // Each close takes what is registered so far: a start resumed after its file ended closes the rest.
    for (const c of closers.splice(0).reverse()) await c();
  };
  let settle!: () => void;
  const entry = { close, abandon: () => (abandoned = true), settled: new Promise<void>((r) => (settle = r)) };
  live.add(entry);
  /** Registers a closer; throws when the spec file has already ended (its `afterAll` ran). */
  const started = (...cs: (() => unknown)[]): void => {
    closers.push(...cs);
    if (abandoned) throw new Error('startFullSystem: the spec file ended before the system had started');
  };
  try {
    const cluster = opts.redisCluster ?? false;
    const [redis, plugin, service] = await Promise.all([
      startIndexRedis(cluster, MODEL),
      buildPlugin(),
      startSseUpstream('service'),
    ]);
    started(
      () => redis.stop(),
      () => service.close(),
      () => plugin.cleanup(),
    );
    const fleet = await startTestFleet(n, opts.emulator, opts.podExtra);
    started(() => fleet.close());
    const index = observerIndex({ kind: 'redis', url: redis.url, cluster, keyPrefix });
    started(() => index.close());
    const collector = startCollector(index, fleet.config.pods ?? []);
    started(() => collector.stop());
    await collector.start();
    await waitFor(
      'pods registered',
      async () => (await index.listPods(MODEL)).filter((p) => p.address).length === entries,
      20_000,
    );
    const pluginConfig = {
      ...pluginConfigFromFleet(
        { ...fleet.config, redis_url: redis.url, redis_cluster: cluster },
        MODEL,
        'e2e fleet',
      ),
      redis_key_prefix: keyPrefix,
      redis_timeout_ms: 200,
      ...pluginExtra,
    };
    const gw = await startPluginGateway(plugin, service.url, pluginConfig, opts.gateway);
    started(() => gw.close());
    // Until the config's tokenizer is loaded (in the background) the plugin routes on load alone: a spec's
    // first requests would be served without the cache-aware path (or the admission guard) it checks.
    await waitPluginWarm(gw, pluginConfig);
    started();
    return { redis, fleet, index, collector, plugin, service, gw, pluginConfig, close };
  } catch (e) {
    await close();
    throw e;
  } finally {
    settle();
  }
}

/**
 * Sum of a Prometheus counter over all its label sets, from a pod's /metrics; with `engine`, over that DP
 * rank's only.
 */
export async function promCounter(base: string, name: string, engine?: number): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      if (engine === undefined || line.includes(`engine="${engine}"`))
        sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

/** POSTs a chat completion body (an object, or JSON already) to `base`/v1/chat/completions. */
export function postChat(base: string, body: unknown): Promise<Response> {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
