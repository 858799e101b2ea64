// Starts the whole system for end-to-end specs: emulated pods, collector, Redis, plugin behind Kong.
import type { Gateway } from '../../kong/stand-in/index.js';
import type { EmulatorSection } from '../../src/config/emulator-section.js';
import type { Collector } from '../../src/collector/collector.js';
import { createKvIndex, type KvIndex } from '../../src/index/index.js';
import { pluginConfigFromFleet } from '../../src/router/from-fleet.js';
import { MODEL, startTestFleet, type TestFleet } from '../02-integration/emulator/emulator-fleet.js';
import { startSseUpstream, type SseUpstream } from '../02-integration/kong/test-servers.js';
import { buildPlugin, startPluginGateway, type BuiltPlugin } from '../02-integration/plugin/harness.js';
import { startCollector } from './collector/collector-harness.js';
import { waitFor } from './ports.js';
import { startIndexRedis, type IndexRedis } from './redis-cluster.js';

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
  } = {},
): Promise<FullSystem> {
  const n = opts.pods ?? 3;
  // One index entry per DP rank.
  const entries = n * Number(opts.podExtra?.data_parallel_size ?? 1);
  // Stopped in reverse order, also when a later step fails.
  const closers: (() => unknown)[] = [];
  const close = async (): Promise<void> => {
    for (const c of closers.reverse()) await c();
    closers.length = 0;
  };
  try {
    const cluster = opts.redisCluster ?? false;
    const [redis, plugin, service] = await Promise.all([
      startIndexRedis(cluster, MODEL),
      buildPlugin(),
      startSseUpstream('service'),
    ]);
    closers.push(
      () => redis.stop(),
      () => service.close(),
      () => plugin.cleanup(),
    );
    const fleet = await startTestFleet(n, opts.emulator, opts.podExtra);
    closers.push(() => fleet.close());
    const index = createKvIndex({ kind: 'redis', url: redis.url, cluster, keyPrefix });
    closers.push(() => index.close());
    const collector = startCollector(index, fleet.config.pods ?? []);
    closers.push(() => collector.stop());
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
    const gw = await startPluginGateway(plugin, service.url, pluginConfig);
    closers.push(() => gw.close());
    return { redis, fleet, index, collector, plugin, service, gw, pluginConfig, close };
  } catch (e) {
    await close();
    throw e;
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
