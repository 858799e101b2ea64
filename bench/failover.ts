// Measures a Redis failover as the router sees it (Sentinel and Cluster): outage, failed lookups, recovery.
/**
 * For each of Redis Sentinel (a primary, a replica, three sentinels; down-after-milliseconds 1000) and a Redis
 * Cluster (3 shards, the model's with a replica; cluster-node-timeout 2000), ROUNDS times on fresh processes:
 * lookups every 10 ms with the plugin's default budget (25 ms) through the index, the model's primary
 * SIGKILLed, until a lookup sees the index again. Prints a table and writes bench/results/failover.json.
 * Run: npm run bench:failover (KINF_BENCH_ROUNDS, default 3).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { startRedisCluster } from '../harness/redis-cluster.js';
import { startRedisSentinel } from '../harness/redis-sentinel.js';
import { waitFor } from '../harness/wait-for.js';
import { keyFromWords } from '../src/core/block-keys.js';
import { isKinferenceError } from '../src/core/errors.js';
import { RedisKvIndex, modelKeyBase, type RedisKvIndexOptions } from '../src/index/index.js';

const MODEL = 'bench-model';
const ROUNDS = Number(process.env.KINF_BENCH_ROUNDS ?? 3);
const KEYS = Array.from({ length: 16 }, (_, i) => keyFromWords(0xfeed, i));

interface Setup {
  opts: Omit<RedisKvIndexOptions, 'keyPrefix'>;
  /** Kills the model's primary; resolves when the replica serves in its place. */
  fail(): Promise<{ killedAt: number; promotedAt: number }>;
  stop(): Promise<void>;
}

async function sentinelSetup(): Promise<Setup> {
  const s = await startRedisSentinel({ replicas: 1 });
  return {
    opts: { url: s.url, sentinel: { nodes: s.sentinelAddresses, master: s.master } },
    async fail() {
      const old = await s.primary();
      await waitFor('replica in sync', () => s.replicasInSync(), 30_000, 50);
      await s.nodes[old]!.server.kill();
      const killedAt = Date.now();
      await s.promotedAfter(old);
      return { killedAt, promotedAt: Date.now() };
    },
    stop: () => s.stop(),
  };
}

async function clusterSetup(): Promise<Setup> {
  const c = await startRedisCluster(3);
  const slot = await c.slotOf(modelKeyBase('kinf', MODEL));
  const owner = await c.ownerOf(slot);
  const seed = c.nodes.find((_, i) => i !== owner)!.url;
  const replica = await c.addReplica(owner);
  return {
    opts: { url: seed, cluster: true },
    async fail() {
      await c.nodes[owner]!.server.kill();
      const killedAt = Date.now();
      await waitFor(
        'the replica serves the slot',
        async () => (await c.ownerOf(slot)) === c.nodes.indexOf(replica),
        30_000,
        20,
      );
      return { killedAt, promotedAt: Date.now() };
    },
    stop: () => c.stop(),
  };
}

async function round(start: () => Promise<Setup>) {
  const setup = await start();
  const writer = new RedisKvIndex({
    ...setup.opts,
    keyPrefix: 'kinf',
    commandTimeoutMs: 10_000,
    verifyIntervalMs: 0,
  });
  const reader = new RedisKvIndex({ ...setup.opts, keyPrefix: 'kinf', lookupTimeoutMs: 25 });
  try {
    const pod = { model: MODEL, podId: 'pod-a' };
    await writer.upsertPodState(pod, { address: '127.0.0.1:1' });
    await writer.apply(pod, [{ op: 'store', keys: KEYS, tier: 'GPU' }]);
    const calls: { at: number; ok: boolean; ms: number; code: string | null }[] = [];
    let stop = false;
    const loop = (async () => {
      while (!stop) {
        const at = Date.now();
        try {
          const r = await reader.lookup(MODEL, KEYS);
          calls.push({
            at,
            ok: r.pods[0]?.prefixBlocks.GPU === KEYS.length,
            ms: Date.now() - at,
            code: null,
          });
        } catch (e) {
          calls.push({ at, ok: false, ms: Date.now() - at, code: isKinferenceError(e) ? e.code : 'other' });
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    await waitFor('lookups succeed', () => calls.some((c) => c.ok), 20_000);
    const { killedAt, promotedAt } = await setup.fail();
    await waitFor(
      'lookups see the index again',
      () => calls.some((c) => c.at > killedAt && c.ok),
      30_000,
      20,
    );
    stop = true;
    await loop;
    const back = calls.find((c) => c.at > killedAt && c.ok)!.at;
    const failed = calls.filter((c) => c.at >= killedAt && c.at < back);
    return {
      promotedMs: promotedAt - killedAt,
      indexBackMs: back - killedAt,
      indexBackAfterPromotionMs: back - promotedAt,
      lookupsDuringOutage: failed.length,
      failedLookups: calls.filter((c) => !c.ok).length,
      failureCodes: [...new Set(failed.map((c) => c.code ?? 'stale'))],
      slowestFailureMs: Math.max(0, ...failed.map((c) => c.ms)),
    };
  } finally {
    await Promise.all([writer.close(), reader.close()]);
    await setup.stop();
  }
}

const out: Record<string, Awaited<ReturnType<typeof round>>[]> = { sentinel: [], cluster: [] };
for (let i = 0; i < ROUNDS; i++) {
  out.sentinel!.push(await round(sentinelSetup));
  out.cluster!.push(await round(clusterSetup));
}
const range = (xs: number[]): string => `${Math.min(...xs)}–${Math.max(...xs)}`;
const rows = Object.entries(out).map(([kind, rs]) => ({
  kind,
  'promoted after kill (ms)': range(rs.map((r) => r.promotedMs)),
  'index back after kill (ms)': range(rs.map((r) => r.indexBackMs)),
  'back after promotion (ms)': range(rs.map((r) => r.indexBackAfterPromotionMs)),
  'lookups refused in outage': range(rs.map((r) => r.lookupsDuringOutage)),
  'slowest refusal (ms)': range(rs.map((r) => r.slowestFailureMs)),
  codes: [...new Set(rs.flatMap((r) => r.failureCodes))].join(' '),
}));
console.table(rows);
mkdirSync('bench/results', { recursive: true });
writeFileSync(
  'bench/results/failover.json',
  `${JSON.stringify({ command: 'npm run bench:failover', rounds: ROUNDS, lookupBudgetMs: 25, summary: rows, runs: out }, null, 2)}\n`,
);
console.log('wrote bench/results/failover.json');
