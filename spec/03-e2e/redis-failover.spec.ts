import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisSentinel, type RedisSentinelSetup } from '../../harness/redis-sentinel.js';
import type { RedisServer } from '../../harness/redis-server.js';
import type { Gateway } from '../../kong/stand-in/index.js';
import { createKvIndex, type KvIndexOptions } from '../../src/index/index.js';
import { startSseUpstream, type SseUpstream } from '../02-integration/kong/test-servers.js';
import {
  buildPlugin,
  keysFor,
  LONG_SYSTEM_PROMPT,
  startPluginGateway,
  type BuiltPlugin,
} from '../02-integration/plugin/harness.js';
import { waitFor } from '../helpers/ports.js';
import { startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js';

/**
 * A Redis failover under traffic, end to end: OpenAI SDK → Kong stand-in → the real plugin server → the
 * index on Redis Sentinel (a primary, a replica, three sentinels) or on a Redis Cluster (the model's shard
 * with a replica) → SSE upstreams. The primary is killed while requests flow: every request is still
 * answered by a pod (routed on load while the index is unreachable, never an error), and routing on the
 * cache returns by itself once the replica is promoted.
 */
const MODEL = 'test-model';
const PREFIX = 'kinf-e2e-failover';

interface Backend {
  /** The plugin's Redis settings. */
  config: Record<string, unknown>;
  /** The same, for a writer's index. */
  index: Omit<Extract<KvIndexOptions, { kind: 'redis' }>, 'kind'>;
  /** Kills the model's primary; resolves when the replica serves in its place. */
  fail(): Promise<{ killedAt: number; promotedAt: number }>;
  inSync(): Promise<boolean>;
  stop(): Promise<void>;
}

async function sentinelBackend(): Promise<Backend> {
  const s: RedisSentinelSetup = await startRedisSentinel({ replicas: 1 });
  return {
    config: { redis_url: s.url, redis_sentinels: s.sentinelAddresses, redis_sentinel_master: s.master },
    index: { url: s.url, sentinel: { nodes: s.sentinelAddresses, master: s.master } },
    async fail() {
      const old = await s.primary();
      await s.nodes[old]!.server.kill();
      const killedAt = Date.now();
      await s.promotedAfter(old);
      return { killedAt, promotedAt: Date.now() };
    },
    inSync: () => s.replicasInSync(),
    stop: () => s.stop(),
  };
}

async function clusterBackend(): Promise<Backend> {
  const c: TestCluster = await startRedisCluster(3);
  const slot = await c.slotOfModel(MODEL);
  const owner = await c.ownerOf(slot);
  const url = await c.urlAvoiding(MODEL);
  const replica = await c.addReplica(owner);
  const primary: RedisServer = c.nodes[owner]!.server;
  const off = (info: string, f: string): string | undefined => new RegExp(`${f}:(\\d+)`).exec(info)?.[1];
  return {
    config: { redis_url: url, redis_cluster: true },
    index: { url, cluster: true },
    async fail() {
      await primary.kill();
      const killedAt = Date.now();
      await waitFor(
        'the replica serves the slot',
        async () => (await c.ownerOf(slot)) === c.nodes.indexOf(replica),
        30_000,
        50,
      );
      return { killedAt, promotedAt: Date.now() };
    },
    async inSync() {
      const p = off(await c.nodes[owner]!.admin.info('replication'), 'master_repl_offset');
      return p !== undefined && p === off(await replica.admin.info('replication'), 'slave_repl_offset');
    },
    stop: () => c.stop(),
  };
}

const messages = (q: string): OpenAI.Chat.ChatCompletionMessageParam[] => [
  { role: 'system', content: LONG_SYSTEM_PROMPT },
  { role: 'user', content: q },
];

describe.each([
  { name: 'Redis Sentinel', start: sentinelBackend },
  { name: 'a Redis Cluster', start: clusterBackend },
])('e2e: the index’s primary killed under traffic ($name)', ({ name, start }) => {
  let b: Backend;
  let plugin: BuiltPlugin;
  let gw: Gateway;
  let service: SseUpstream;
  const pods: Record<string, SseUpstream> = {};
  let client: OpenAI;

  /** One streamed chat: who answered, and the plugin's decision headers it got (expose_headers). */
  async function chat(q: string): Promise<{ servedBy: string; text: string; fallback?: string }> {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: messages(q),
      stream: true,
    });
    let text = '';
    let id = '';
    for await (const chunk of stream) {
      id ||= chunk.id;
      text += chunk.choices[0]?.delta.content ?? '';
    }
    const servedBy = /^chatcmpl-(.+)-\d+$/.exec(id)?.[1] ?? '?';
    const upstream = servedBy === 'service' ? service : pods[servedBy];
    const fallback = upstream?.requests.at(-1)?.headers['x-kinference-fallback'];
    return { servedBy, text, ...(typeof fallback === 'string' ? { fallback } : {}) };
  }

  beforeAll(async () => {
    [b, plugin, service] = await Promise.all([start(), buildPlugin(), startSseUpstream('service')]);
    for (const id of ['pod-a', 'pod-b', 'pod-c']) pods[id] = await startSseUpstream(id);
    const config = { ...b.config, redis_key_prefix: PREFIX, redis_timeout_ms: 200, expose_headers: true };
    const keys = await keysFor(config, { model: MODEL, messages: messages('warm-up'), stream: true });
    // The collector's writes, done here: pod-c holds the shared system prompt.
    const index = createKvIndex({ kind: 'redis', ...b.index, keyPrefix: PREFIX, commandTimeoutMs: 10_000 });
    try {
      for (const [id, s] of Object.entries(pods)) {
        const ref = { model: MODEL, podId: id };
        const now = Date.now();
        // Fresh for long: the test's index is written once (stale_after_ms would drop its pods otherwise).
        await index.upsertPodState(ref, {
          address: `127.0.0.1:${s.port}`,
          healthy: true,
          running: 0,
          waiting: 0,
          lastEventAtMs: now + 600_000,
          lastScrapeAtMs: now + 600_000,
        });
        if (id === 'pod-c')
          await index.apply(ref, [{ op: 'store', keys: keys.slice(0, keys.length - 2), tier: 'GPU' }]);
      }
    } finally {
      await index.close();
    }
    await waitFor('the replica has the index', () => b.inSync(), 30_000, 50);
    gw = await startPluginGateway(plugin, service.url, config);
    client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test', maxRetries: 0 });
    await waitFor(
      'routing on the cache',
      async () => (await chat('warm-up')).servedBy === 'pod-c',
      20_000,
      100,
    );
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    await Promise.all([b?.stop(), service?.close(), ...Object.values(pods).map((p) => p.close())]);
    plugin?.cleanup();
  });

  it('every request is answered while there is no primary; cache-aware routing returns by itself', async () => {
    const seen: { at: number; servedBy: string; fallback?: string; error?: string }[] = [];
    let stop = false;
    let q = 0;
    const traffic = (async () => {
      while (!stop) {
        const at = Date.now();
        try {
          const r = await chat(`Rule ${++q}?`);
          seen.push({ at, servedBy: r.servedBy, ...(r.fallback ? { fallback: r.fallback } : {}) });
          if (!/^hello from (pod-[abc]|service) and goodbye$/.test(r.text)) seen.at(-1)!.error = r.text;
        } catch (e) {
          seen.push({ at, servedBy: '-', error: String(e) });
        }
      }
    })();
    await waitFor('traffic flows', () => seen.length >= 3);
    const { killedAt, promotedAt } = await b.fail();
    // Cache-aware again: answered by pod-c with no fallback, for 5 requests in a row.
    const back = (): number => {
      const after = seen.filter((s) => s.at > killedAt);
      for (let i = 0; i + 5 <= after.length; i++)
        if (after.slice(i, i + 5).every((s) => s.servedBy === 'pod-c' && !s.fallback)) return after[i]!.at;
      return 0;
    };
    await waitFor('cache-aware routing returns', () => back() > 0, 30_000, 50);
    stop = true;
    await traffic;

    const during = seen.filter((s) => s.at > killedAt && s.at < back());
    const reasons = [...new Set(during.map((s) => s.fallback ?? 'none'))];
    console.log(
      `[failover e2e, ${name}] ${seen.length} requests, ${seen.filter((s) => s.error).length} errors; ` +
        `promoted ${promotedAt - killedAt} ms after the kill; routed on load for ${back() - killedAt} ms ` +
        `(${during.length} requests, fallback ${reasons.join(', ')}); cache-aware again ${back() - promotedAt} ms after the promotion`,
    );
    expect(seen.filter((s) => s.error)).toEqual([]);
    expect(during.length).toBeGreaterThan(0);
    for (const s of during) expect(s.fallback ?? 'none').toMatch(/^index_(error|timeout)$|^none$/);
  }, 90_000);
});
