/**
 * bench:index — the Redis KV-location index on a real redis-server (started here, on a free port).
 *
 * Fills the index with 8 pods and ~100k (block, pod) entries shaped like real prompts (shared 15k-token
 * system prompts, multiturn conversations with their own history, a few single-shot prompts), then
 * measures:
 *   - apply throughput (block ops/s): the fill, then a steady state of evictions and stores;
 *   - bytes per (block, pod) entry: INFO used_memory delta / entries (with and without the block TTL,
 *     and for the worst case where no block is shared);
 *   - lookups of 1,000-block prompts: round trip from Node (p50/p99) and Redis server time per call
 *     (INFO commandstats usec_per_call of EVALSHA, after CONFIG RESETSTAT).
 * Then the same fill, churn and lookups on a 3-shard Redis Cluster (`redis_cluster: true`, the client seeded
 * from a node that does not hold the model's slot), the lookups interleaved with the standalone ones so that
 * both see the same machine. Prints a table and writes bench/results/index.json. Run: npm run bench:index
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { blockKeys, keySeed } from '../src/core/block-keys.js';
import type { BlockKey } from '../src/core/types.js';
import { RedisKvIndex, modelKeyBase, type IndexOp, type PodRef } from '../src/index/index.js';
import { startRedisCluster } from '../harness/redis-cluster.js';
import { startRedisServer } from '../harness/redis-server.js';
import { envCount, noOptions } from './lib/cli.js';

noOptions(
  'bench:index',
  `the Redis KV-location index on a real redis-server (started on a free port): apply
throughput, bytes per (block, pod) entry, lookup latency at 8 pods and ~100k entries; then the same on a 3-shard
Redis Cluster. Writes bench/results/index.json. KINF_BENCH_ENTRIES (default 100000) and KINF_BENCH_LOOKUPS (3000)
set the size (CI runs a small one).`,
);

const MODEL = 'Qwen/Qwen3-8B';
const BLOCK = 16;
const PODS = Array.from({ length: 8 }, (_, i) => `pod-${i}`);
const TARGET_ENTRIES = envCount('bench:index', 'KINF_BENCH_ENTRIES', 100_000);
const SYSTEM_PROMPTS = [15_000, 15_000, 12_000, 4_000]; // tokens; popularity falls with the index
const LOOKUP_BLOCKS = 1000;
const LOOKUPS = envCount('bench:index', 'KINF_BENCH_LOOKUPS', 3000);
const BATCH_KEYS = 256; // block keys per apply call, like a busy collector batch
const KEY_PREFIX = 'bench';
const CLUSTER_NODES = 3;

// ---------- deterministic workload ----------

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = mulberry32(20260901);
const randInt = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
const tokens = (n: number) => Array.from({ length: n }, () => randInt(0, 151_000));
const SEED = keySeed({ model: MODEL });

/** Picks index i with weight 1/(i+1) (a Zipf-like popularity). */
function zipf(n: number): number {
  const w = Array.from({ length: n }, (_, i) => 1 / (i + 1));
  let r = rnd() * w.reduce((a, b) => a + b, 0);
  for (let i = 0; i < n; i++) if ((r -= w[i]!) <= 0) return i;
  return n - 1;
}

interface Conversation {
  system: number;
  history: BlockKey[]; // blocks after the system prompt
  pods: string[];
}

interface Workload {
  systemKeys: BlockKey[][];
  conversations: Conversation[];
  /** Per pod, the ordered stores the collector would send (one BlockStored run per turn). */
  stores: Map<string, BlockKey[][]>;
  entries: number;
  distinctBlocks: number;
}

function buildWorkload(): Workload {
  const systemKeys = SYSTEM_PROMPTS.map((n) => blockKeys(tokens(n), BLOCK, SEED));
  const held = new Map(PODS.map((p) => [p, new Set<BlockKey>()]));
  const stores = new Map(PODS.map((p) => [p, [] as BlockKey[][]]));
  const conversations: Conversation[] = [];
  let entries = 0;
  const hold = (pod: string, run: BlockKey[]) => {
    const h = held.get(pod)!;
    const fresh = run.filter((k) => !h.has(k));
    for (const k of fresh) h.add(k);
    entries += fresh.length;
    if (fresh.length) stores.get(pod)!.push(fresh);
  };
  while (entries < TARGET_ENTRIES) {
    if (rnd() < 0.15) {
      // single-shot prompt, no shared prefix (the control traffic)
      hold(PODS[randInt(0, PODS.length - 1)]!, blockKeys(tokens(randInt(1_000, 8_000)), BLOCK, SEED));
      continue;
    }
    const system = zipf(systemKeys.length);
    const sys = systemKeys[system]!;
    const turns = randInt(1, 6);
    let parent = sys.at(-1)!;
    const history: BlockKey[] = [];
    const home = PODS[randInt(0, PODS.length - 1)]!;
    // a fifth of conversations were rerouted once under load: their prefix lives on two pods
    const pods = rnd() < 0.2 ? [home, PODS[randInt(0, PODS.length - 1)]!] : [home];
    for (const pod of new Set(pods)) hold(pod, sys);
    for (let t = 0; t < turns; t++) {
      const turn = blockKeys(tokens(randInt(150, 1_200)), BLOCK, parent);
      parent = turn.at(-1) ?? parent;
      history.push(...turn);
      for (const pod of new Set(pods)) hold(pod, turn);
    }
    conversations.push({ system, history, pods: [...new Set(pods)] });
  }
  const distinct = new Set<BlockKey>();
  for (const h of held.values()) for (const k of h) distinct.add(k);
  return { systemKeys, conversations, stores, entries, distinctBlocks: distinct.size };
}

/** Cuts each pod's store runs into apply batches of at most BATCH_KEYS keys. */
function batches(runs: BlockKey[][], op: 'store' | 'remove'): IndexOp[][] {
  const out: IndexOp[][] = [];
  let cur: IndexOp[] = [];
  let n = 0;
  for (const run of runs) {
    if (n + run.length > BATCH_KEYS && cur.length) {
      out.push(cur);
      cur = [];
      n = 0;
    }
    cur.push({ op, keys: run, tier: 'GPU' });
    n += run.length;
  }
  if (cur.length) out.push(cur);
  return out;
}

// ---------- redis-server ----------

/** A plain client of one server (admin commands: INFO, SLOWLOG, CONFIG, FLUSHALL). */
async function adminClient(port: number): Promise<Redis> {
  const admin = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
  admin.on('error', () => {});
  await admin.ping();
  return admin;
}

async function usedMemory(admin: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
}

async function evalshaStats(admin: Redis): Promise<{ calls: number; usecPerCall: number }> {
  const m = /cmdstat_evalsha:calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/.exec(
    await admin.info('commandstats'),
  );
  return { calls: Number(m?.[1] ?? 0), usecPerCall: Number(m?.[2] ?? NaN) };
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const round = (v: number, d = 1) => Math.round(v * 10 ** d) / 10 ** d;

// ---------- phases ----------

async function fill(ix: RedisKvIndex, w: Workload): Promise<{ ops: number; calls: number; seconds: number }> {
  const perPod = PODS.map((p) => ({
    pod: { model: MODEL, podId: p } as PodRef,
    bs: batches(w.stores.get(p)!, 'store'),
  }));
  let ops = 0;
  let calls = 0;
  const t0 = performance.now();
  // One ordered queue per pod, pods in parallel: how the collector writes.
  await Promise.all(
    perPod.map(async ({ pod, bs }) => {
      for (const b of bs) {
        await ix.apply(pod, b);
        calls++;
        for (const op of b) if (op.op !== 'clear') ops += op.keys.length;
      }
    }),
  );
  return { ops, calls, seconds: (performance.now() - t0) / 1000 };
}

/** Steady state: each pod evicts the tail of an old conversation and stores a new turn elsewhere. */
function churnWork(w: Workload): { pod: PodRef; batches: IndexOp[][] }[] {
  return PODS.map((podId) => {
    const convs = w.conversations.filter((c) => c.pods.includes(podId));
    const out: IndexOp[][] = [];
    // A small run (KINF_BENCH_ENTRIES) may leave a pod with no conversation to churn.
    for (let i = 0; i < (convs.length > 0 ? 40 : 0); i++) {
      const c = convs[randInt(0, convs.length - 1)]!;
      const tail = c.history.slice(-randInt(8, 64));
      const fresh = blockKeys(tokens(tail.length * BLOCK), BLOCK, SEED);
      out.push([
        { op: 'remove', keys: tail, tier: 'GPU' },
        { op: 'store', keys: fresh, tier: 'GPU' },
      ]);
    }
    return { pod: { model: MODEL, podId }, batches: out };
  });
}

async function churn(
  ix: RedisKvIndex,
  work: { pod: PodRef; batches: IndexOp[][] }[],
): Promise<{ ops: number; seconds: number; opsPerSecond: number }> {
  let ops = 0;
  const t0 = performance.now();
  await Promise.all(
    work.map(async ({ pod, batches }) => {
      for (const b of batches) {
        await ix.apply(pod, b);
        for (const op of b) if (op.op !== 'clear') ops += op.keys.length;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { ops, seconds: round(seconds, 3), opsPerSecond: Math.round(ops / seconds) };
}

function lookupPrompts(w: Workload): { kind: string; keys: BlockKey[] }[] {
  const out: { kind: string; keys: BlockKey[] }[] = [];
  const long = w.conversations.filter((c) => w.systemKeys[c.system]!.length + c.history.length >= 300);
  for (let i = 0; i < LOOKUPS; i++) {
    const r = rnd();
    if (r < 0.1) {
      // control: a prompt nobody has seen
      out.push({ kind: 'unseen', keys: blockKeys(tokens(LOOKUP_BLOCKS * BLOCK), BLOCK, SEED) });
      continue;
    }
    const c = long[randInt(0, long.length - 1)]!;
    let keys = [...w.systemKeys[c.system]!, ...c.history];
    if (r < 0.25) {
      // a new conversation on a known system prompt
      keys = w.systemKeys[c.system]!.slice();
    }
    // next turn: what is cached, then the new message; exactly LOOKUP_BLOCKS blocks
    if (keys.length < LOOKUP_BLOCKS)
      keys.push(...blockKeys(tokens((LOOKUP_BLOCKS - keys.length) * BLOCK), BLOCK, keys.at(-1)!));
    out.push({ kind: r < 0.25 ? 'new-conversation' : 'next-turn', keys: keys.slice(0, LOOKUP_BLOCKS) });
  }
  return out;
}

/**
 * Server time of each EVALSHA on one server, from SLOWLOG with threshold 0 (commandstats only gives the
 * mean). Redis 7 also logs the commands a script runs, so the caller drains the log every ≤ 200 calls.
 */
async function evalshaLog(admin: Redis): Promise<{ drain(): Promise<void>; end(): Promise<number[]> }> {
  await admin.config('SET', 'slowlog-log-slower-than', '0');
  await admin.config('SET', 'slowlog-max-len', '20000');
  await admin.slowlog('RESET');
  const usec: number[] = [];
  const drain = async (): Promise<void> => {
    const log = (await admin.slowlog('GET', 20000)) as [number, number, number, (string | Buffer)[]][];
    await admin.slowlog('RESET');
    for (const e of log) if (String(e[3][0]).toLowerCase() === 'evalsha') usec.push(e[2]);
  };
  return {
    drain,
    async end() {
      await drain();
      await admin.config('SET', 'slowlog-log-slower-than', '10000');
      return usec.sort((a, b) => a - b);
    },
  };
}

/** An index under test, and a plain client of the server that holds the model's keys. */
interface LookupTarget {
  ix: RedisKvIndex;
  admin: Redis;
}

const LOOKUP_CHUNK = 200;

/**
 * The same lookups on each target, taking turns every LOOKUP_CHUNK prompts, so that a busy spell of the
 * shared machine falls on every target alike.
 */
async function lookups(targets: readonly LookupTarget[], prompts: { kind: string; keys: BlockKey[] }[]) {
  const runs = [];
  for (const t of targets) {
    for (const p of prompts.slice(0, 200)) await t.ix.lookup(MODEL, p.keys); // warm up
    await t.admin.config('RESETSTAT');
    runs.push({ t, log: await evalshaLog(t.admin), rtt: [] as number[], hitBlocks: 0 });
  }
  for (let from = 0; from < prompts.length; from += LOOKUP_CHUNK)
    for (const r of runs) {
      for (const p of prompts.slice(from, from + LOOKUP_CHUNK)) {
        const t0 = performance.now();
        const res = await r.t.ix.lookup(MODEL, p.keys);
        r.rtt.push(performance.now() - t0);
        r.hitBlocks += Math.max(...res.pods.map((x) => x.prefixBlocks.GPU));
      }
      await r.log.drain();
    }
  const out = [];
  for (const r of runs) {
    const usec = await r.log.end();
    const server = await evalshaStats(r.t.admin);
    const rtt = r.rtt.sort((a, b) => a - b);
    out.push({
      count: prompts.length,
      mix: Object.fromEntries(
        ['next-turn', 'new-conversation', 'unseen'].map((k) => [
          k,
          prompts.filter((p) => p.kind === k).length,
        ]),
      ),
      meanBestPrefixBlocks: round(r.hitBlocks / prompts.length),
      roundTripMs: {
        p50: round(pct(rtt, 50), 3),
        p99: round(pct(rtt, 99), 3),
        mean: round(rtt.reduce((a, b) => a + b, 0) / rtt.length, 3),
      },
      serverUsec: {
        p50: pct(usec, 50),
        p99: pct(usec, 99),
        slowlogMean: round(usec.reduce((a, b) => a + b, 0) / usec.length),
        slowlogCount: usec.length,
        commandstatsMean: round(server.usecPerCall, 2),
        calls: server.calls,
      },
    });
  }
  return out;
}

/** Server time of an EVALSHA that does nothing, with the same 8 KB argument: what this machine charges per call. */
async function trivialEvalshaUsec(admin: Redis): Promise<number> {
  const sha = (await admin.script('LOAD', 'return 1')) as string;
  const arg = Buffer.alloc(LOOKUP_BLOCKS * 8, 7);
  const log = await evalshaLog(admin);
  for (let i = 0; i < 1000; i++) {
    await admin.evalsha(sha, 1, 'k', 'x', arg);
    if ((i + 1) % LOOKUP_CHUNK === 0) await log.drain();
  }
  return pct(await log.end(), 50);
}

/** Bytes per entry when no block is shared at all (every block on exactly one pod). */
async function worstCaseBytes(url: string, admin: Redis, ttl: number): Promise<number> {
  await admin.flushall();
  const ix = new RedisKvIndex({
    url,
    keyPrefix: KEY_PREFIX,
    blockTtlSeconds: ttl,
    commandTimeoutMs: 60_000,
  });
  await ix.apply({ model: 'warm-up', podId: 'x' }, [
    { op: 'store', keys: blockKeys(tokens(16), BLOCK, SEED), tier: 'GPU' },
  ]);
  await ix.lookup('warm-up', []);
  const before = await usedMemory(admin);
  const n = TARGET_ENTRIES; // as many entries as the realistic fill: same hash-table sizing
  const per = n / PODS.length;
  for (const podId of PODS) {
    const keys = blockKeys(tokens(per * BLOCK), BLOCK, SEED);
    for (let i = 0; i < keys.length; i += BATCH_KEYS)
      await ix.apply({ model: MODEL, podId }, [
        { op: 'store', keys: keys.slice(i, i + BATCH_KEYS), tier: 'GPU' },
      ]);
  }
  const bytes = (await usedMemory(admin)) - before;
  await ix.close();
  return round(bytes / n);
}

interface MemoryFigures {
  entries: number;
  distinctBlocks: number;
  blockKeysInRedis: number;
  meanPodsPerBlock: number;
  usedMemoryDeltaBytes: number;
  bytesPerEntry: number;
  bytesPerBlockKey: number;
}

/**
 * Fills a fresh database with the workload; returns the fill's throughput and the memory it took. `admin`: a
 * client of the server that holds the model's keys (on a Cluster, the slot's primary).
 */
async function fillAndMeasure(url: string, admin: Redis, w: Workload, ttl: number, cluster = false) {
  await admin.flushall();
  const ix = new RedisKvIndex({
    url,
    cluster,
    keyPrefix: KEY_PREFIX,
    blockTtlSeconds: ttl,
    lookupTimeoutMs: 5000,
    commandTimeoutMs: 60_000,
  });
  for (const podId of PODS)
    await ix.upsertPodState({ model: MODEL, podId }, { address: `${podId}:8000`, running: 2 });
  await ix.lookup(MODEL, []); // scripts loaded, pod keys written: the baseline holds everything but blocks
  await ix.apply({ model: MODEL, podId: PODS[0]! }, [{ op: 'clear' }]);
  const before = await usedMemory(admin);
  const f = await fill(ix, w);
  const bytes = (await usedMemory(admin)) - before;
  const blockKeysInRedis = (await admin.dbsize()) - 3 - PODS.length; // pods, seq, applied, states
  const memory: MemoryFigures = {
    entries: w.entries,
    distinctBlocks: w.distinctBlocks,
    blockKeysInRedis,
    meanPodsPerBlock: round(w.entries / w.distinctBlocks, 2),
    usedMemoryDeltaBytes: bytes,
    bytesPerEntry: round(bytes / w.entries),
    bytesPerBlockKey: round(bytes / blockKeysInRedis),
  };
  const applyFill = {
    ops: f.ops,
    calls: f.calls,
    seconds: round(f.seconds, 3),
    opsPerSecond: Math.round(f.ops / f.seconds),
  };
  return { ix, memory, applyFill };
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const loadStart = loadavg()[0]!;
  const w = buildWorkload();
  const server = await startRedisServer();
  const admin = await adminClient(server.port);
  const version = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? '?';
  let cluster: Awaited<ReturnType<typeof startRedisCluster>> | null = null;
  try {
    const noTtl = await fillAndMeasure(server.url, admin, w, 0);
    await noTtl.ix.close();
    const withTtl = await fillAndMeasure(server.url, admin, w, 86_400);
    const work = churnWork(w);
    const applyChurn = await churn(withTtl.ix, work);

    // The same on a Cluster, the client seeded from a node that must send it elsewhere for the model.
    cluster = await startRedisCluster(CLUSTER_NODES);
    // Every key of the model carries the base's hash tag, so the base's slot is theirs.
    const slot = await cluster.slotOf(modelKeyBase(KEY_PREFIX, MODEL));
    const owner = cluster.nodes[await cluster.ownerOf(slot)]!;
    const seed = cluster.nodes.find((n) => n !== owner)!;
    const onCluster = await fillAndMeasure(seed.url, owner.admin, w, 86_400, true);
    const clusterChurn = await churn(onCluster.ix, work);

    const [lookup, clusterLookup] = await lookups(
      [
        { ix: withTtl.ix, admin },
        { ix: onCluster.ix, admin: owner.admin },
      ],
      lookupPrompts(w),
    );
    await withTtl.ix.close();
    await onCluster.ix.close();
    const trivialUsec = await trivialEvalshaUsec(admin);
    const worst = {
      withTtl: await worstCaseBytes(server.url, admin, 86_400),
      noTtl: await worstCaseBytes(server.url, admin, 0),
    };
    const out = {
      bench: 'index',
      date: new Date().toISOString(),
      redisVersion: version,
      node: process.version,
      loadAverage1m: { start: round(loadStart, 2), end: round(loadavg()[0]!, 2) },
      trivialEvalshaServerUsecP50: trivialUsec,
      workload: {
        model: MODEL,
        pods: PODS.length,
        blockSize: BLOCK,
        systemPromptTokens: SYSTEM_PROMPTS,
        conversations: w.conversations.length,
        batchKeys: BATCH_KEYS,
        lookupBlocks: LOOKUP_BLOCKS,
      },
      withTtl: {
        blockTtlSeconds: 86_400,
        memory: withTtl.memory,
        applyFill: withTtl.applyFill,
        applyChurn,
        lookup: lookup!,
      },
      noTtl: { memory: noTtl.memory, applyFill: noTtl.applyFill },
      worstCaseBytesPerEntry: worst,
      cluster: {
        primaries: CLUSTER_NODES,
        seededFromOtherNode: true,
        blockTtlSeconds: 86_400,
        memoryOnSlotOwner: onCluster.memory,
        applyFill: onCluster.applyFill,
        applyChurn: clusterChurn,
        lookup: clusterLookup!,
      },
      targets: { serverUsecPerLookup: 200, bytesPerEntry: 120 },
      cpus: cpus().length,
      wallSeconds: round((performance.now() - t0) / 1000),
    };
    mkdirSync('bench/results', { recursive: true });
    writeFileSync('bench/results/index.json', `${JSON.stringify(out, null, 2)}\n`);
    console.log(
      `Redis ${version}, ${PODS.length} pods, ${w.entries} (block, pod) entries on ${w.distinctBlocks} blocks; ` +
        `load average ${out.loadAverage1m.start} → ${out.loadAverage1m.end} on ${cpus().length} CPUs; ` +
        `empty EVALSHA ${trivialUsec} µs of Redis time (p50)`,
    );
    const c = out.cluster;
    console.table({
      'lookup round trip p50 (ms)': {
        standalone: lookup!.roundTripMs.p50,
        cluster: c.lookup.roundTripMs.p50,
      },
      'lookup round trip p99 (ms)': {
        standalone: lookup!.roundTripMs.p99,
        cluster: c.lookup.roundTripMs.p99,
      },
      'lookup Redis time p50 (µs)': { standalone: lookup!.serverUsec.p50, cluster: c.lookup.serverUsec.p50 },
      'lookup Redis time p99 (µs)': { standalone: lookup!.serverUsec.p99, cluster: c.lookup.serverUsec.p99 },
      'lookup Redis time mean (µs)': {
        standalone: lookup!.serverUsec.commandstatsMean,
        cluster: c.lookup.serverUsec.commandstatsMean,
      },
      'lookup mean best prefix (blocks)': {
        standalone: lookup!.meanBestPrefixBlocks,
        cluster: c.lookup.meanBestPrefixBlocks,
      },
      'bytes/entry, TTL on': {
        standalone: withTtl.memory.bytesPerEntry,
        cluster: c.memoryOnSlotOwner.bytesPerEntry,
      },
      'bytes/entry, no TTL': { standalone: noTtl.memory.bytesPerEntry },
      'bytes/entry, no sharing, TTL on': { standalone: worst.withTtl },
      'bytes/entry, no sharing, no TTL': { standalone: worst.noTtl },
      'apply fill (block ops/s)': {
        standalone: withTtl.applyFill.opsPerSecond,
        cluster: c.applyFill.opsPerSecond,
      },
      'apply churn (block ops/s)': {
        standalone: applyChurn.opsPerSecond,
        cluster: c.applyChurn.opsPerSecond,
      },
    });
    console.log('wrote bench/results/index.json');
  } finally {
    admin.disconnect();
    await server.stop();
    await cluster?.stop();
  }
}

await main();
