/**
 * Collector ingest benchmark: a real redis-server, N vLLM-like ZMQ publishers (PUB + replay ROUTER) in a
 * child process, the collector in this process (one JS thread). Phases:
 *   - lag:        a fixed 20k block events/s; event-to-index lag = apply() resolved − publisher ts;
 *   - throughput: offered loads stepped up; achieved = block events decoded and written to Redis / time
 *                 until every write queue drained; the collector's CPU use per wall second is reported.
 *   - restart:    a clean collector restart after a quiet spell (the pods' replay buffers of 1,000 batches no
 *                 longer reach back to most cached blocks), with and without the handoff the stopped collector
 *                 leaves: cached blocks the index holds once the new collector has caught up, and how long
 *                 the stop and the catch-up took;
 *   - cpu-only:   decode + key pre-encoded batches on one thread, no ZMQ or Redis (per-core capacity).
 * Then memory: RSS, heap, and block-map entries (bounded by block_map_max_entries).
 * Prints a table and writes bench/results/collector.json. Run: npm run bench:collector
 */
import './lib/usage/collector.js'; // first: --help before the heavy imports
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Packr } from 'msgpackr';
import { Publisher, Router } from 'zeromq';
import { Collector } from '../src/collector/collector.js';
import { KeyMapper, newMapperCounters } from '../src/collector/key-mapper.js';
import { parseVllmBatch } from '../src/collector/wire/vllm-events.js';
import { StaticDiscovery } from '../src/collector/discovery/static.js';
import { silentLogger } from '../src/collector/logger.js';
import { CollectorSectionSchema } from '../src/config/collector-section.js';
import { validateConfig } from '../src/config/validate.js';
import { createKvIndex } from '../src/index/index.js';
import { ENTRY } from '../src/index/lua/entry.js';
import { KEY_SUFFIX, modelKeyBase } from '../src/index/redis-keys.js';
import { Redis } from 'ioredis';
import { freeLoopbackPort, startRedisServer } from '../harness/redis-server.js';
import { envCount } from './lib/cli.js';

/** Each phase's length as KINF_BENCH_SECONDS is to its default (the publisher child reads the same). */
const SCALE = envCount('bench:collector', 'KINF_BENCH_SECONDS', 8) / 8;

const MODEL = 'bench/model';
const BS = 16;
const PODS = 4;
const LAG_RATE = 20_000;
const LAG_SECONDS = 8 * SCALE;
const THROUGHPUT_RATES = [100_000, 150_000, 200_000];
const THROUGHPUT_SECONDS = 8 * SCALE;
const POD_CAPACITY_BLOCKS = 50_000;
/**
 * Each pod's replay buffer. vLLM keeps buffer_steps = 10,000 steps by default, a few minutes at full load;
 * these pods keep 1,000 batches at full scale (10 s at one batch per 10 ms tick), so that their cache outlives their
 * buffer as any pod's does after a few minutes.
 */
const REPLAY_BUFFER_BATCHES = Math.round(1_000 * SCALE);
const QUIET_RATE = 2_000;
// Longer than the replay buffer lasts at one batch per pod and tick (10 s at full scale).
const QUIET_SECONDS = 12 * SCALE;
const DOWN_SECONDS = 1;
const TICK_MS = 10;

// ---------------------------------------------------------------------------------------------------
// Publisher side (child process): each pod simulates an engine's KV cache. Every tick it publishes one
// batch (one engine step): BlockStored for new requests and for requests extending their chain, and one
// BlockRemoved per evicted block once the cache is full (as vLLM does), until the block-event quota is met.

type Msg =
  | { cmd: 'init'; pods: number }
  | { cmd: 'probe' }
  | { cmd: 'run'; rate: number; seconds: number }
  | { cmd: 'held' }
  | { cmd: 'exit' };

class SimPod {
  readonly pub = new Publisher({ linger: 0, sendHighWaterMark: 1_000_000 });
  readonly router = new Router({ linger: 0 });
  readonly buffer: { seq: number; payload: Buffer }[] = [];
  readonly cached: bigint[] = [];
  cachedHead = 0;
  chains: bigint[] = [];
  seq = 0;
  next: bigint;
  rng: number;

  constructor(
    readonly id: number,
    readonly packr: Packr,
  ) {
    this.next = (BigInt(id + 1) << 56n) | 0x8000_0000_0000n;
    this.rng = 0x9e3779b9 ^ (id * 7919);
  }

  rand(n: number): number {
    this.rng = (Math.imul(this.rng, 1664525) + 1013904223) >>> 0;
    return this.rng % n;
  }

  async bind(): Promise<[string, string]> {
    const ep = `tcp://127.0.0.1:${await freeLoopbackPort()}`;
    const rep = `tcp://127.0.0.1:${await freeLoopbackPort()}`;
    await this.pub.bind(ep);
    await this.router.bind(rep);
    void this.serveReplay();
    return [ep, rep];
  }

  async serveReplay(): Promise<void> {
    try {
      for await (const [id, , start] of this.router) {
        const from = Number(start!.readBigUInt64BE(0));
        for (const b of this.buffer)
          if (b.seq >= from) await this.router.send([id!, Buffer.alloc(0), seq8(b.seq), b.payload]);
        await this.router.send([id!, Buffer.alloc(0), Buffer.alloc(8, 0xff), Buffer.alloc(0)]);
      }
    } catch {
      // closed
    }
  }

  /** One engine step with about `quota` block events; returns how many it produced. */
  step(quota: number): { events: unknown[]; blocks: number } {
    const events: unknown[] = [];
    let blocks = 0;
    while (blocks < quota) {
      const k = 1 + this.rand(8);
      const extend = this.chains.length > 0 && this.rand(10) < 7;
      const ci = extend ? this.rand(this.chains.length) : -1;
      const parent = extend ? this.chains[ci]! : null;
      const hashes: bigint[] = [];
      for (let i = 0; i < k; i++) hashes.push(this.next++);
      const tokens: number[] = new Array(k * BS);
      for (let i = 0; i < tokens.length; i++) tokens[i] = this.rand(150_000);
      events.push({
        type: 'BlockStored',
        block_hashes: hashes,
        parent_block_hash: parent,
        token_ids: tokens,
        block_size: BS,
        lora_id: null,
        medium: 'GPU',
        lora_name: null,
        extra_keys: hashes.map(() => null),
        group_idx: 0,
        kv_cache_spec_kind: 'full_attention',
      });
      blocks += k;
      if (extend) this.chains[ci] = hashes[k - 1]!;
      else if (this.chains.length < 64) this.chains.push(hashes[k - 1]!);
      else this.chains[this.rand(64)] = hashes[k - 1]!;
      for (const h of hashes) this.cached.push(h);
      while (this.cached.length - this.cachedHead > POD_CAPACITY_BLOCKS) {
        const evicted = this.cached[this.cachedHead++]!;
        events.push({ type: 'BlockRemoved', block_hashes: [evicted], medium: 'GPU', group_idx: 0 });
        blocks++;
      }
      if (this.cachedHead > 100_000) {
        this.cached.splice(0, this.cachedHead);
        this.cachedHead = 0;
      }
    }
    return { events, blocks };
  }

  async publish(events: unknown[]): Promise<void> {
    const payload = this.packr.pack([Date.now() / 1000 + 1e-7, events, 0]);
    const seq = this.seq++;
    this.buffer.push({ seq, payload });
    if (this.buffer.length > REPLAY_BUFFER_BATCHES) this.buffer.shift();
    await this.pub.send([Buffer.alloc(0), seq8(seq), payload]);
  }
}

function seq8(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

async function publisherMain(): Promise<void> {
  // Map events like vLLM ≥ 0.24; uint64 hashes go out as msgpack cf, floats as float64.
  const packr = new Packr({ useRecords: false, useFloat32: 0 });
  const pods: SimPod[] = [];
  process.on('message', (m: Msg) => {
    void (async () => {
      if (m.cmd === 'init') {
        const eps = [];
        for (let i = 0; i < m.pods; i++) {
          const p = new SimPod(i, packr);
          pods.push(p);
          eps.push(await p.bind());
        }
        process.send!({ endpoints: eps });
      } else if (m.cmd === 'held') {
        process.send!({
          held: pods.map((p) => p.cached.length - p.cachedHead),
          lastSeqs: pods.map((p) => p.seq - 1),
        });
      } else if (m.cmd === 'probe') {
        for (const p of pods) await p.publish([]);
        process.send!({ probed: true });
      } else if (m.cmd === 'run') {
        const perTick = (m.rate * TICK_MS) / 1000 / pods.length;
        const t0 = Date.now();
        let ticks = 0;
        let batches = 0;
        let blocks = 0;
        while (Date.now() - t0 < m.seconds * 1000) {
          for (const p of pods) {
            const s = p.step(perTick);
            await p.publish(s.events);
            batches++;
            blocks += s.blocks;
          }
          ticks++;
          const wait = t0 + ticks * TICK_MS - Date.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        process.send!({ batches, blocks, seconds: (Date.now() - t0) / 1000 });
      } else {
        for (const p of pods) {
          p.pub.close();
          p.router.close();
        }
        process.exit(0);
      }
    })();
  });
}

// ---------------------------------------------------------------------------------------------------
// Collector side.

/**
 * The collector's own per-core cost, without ZMQ or Redis: decode + key one stream's pre-encoded batches
 * on this thread. Shows how much of one core the collector needs per block event.
 */
function cpuOnlyCapacity(): { blockEventsPerSec: number; batches: number; blockEvents: number } {
  const packr = new Packr({ useRecords: false, useFloat32: 0 });
  const sim = new SimPod(9, packr);
  sim.pub.close();
  sim.router.close();
  const payloads: Buffer[] = [];
  let blocks = 0;
  for (let i = 0; i < 2000; i++) {
    const st = sim.step(250);
    blocks += st.blocks;
    payloads.push(packr.pack([Date.now() / 1000 + 1e-7, st.events, 0]));
  }
  const mapper = new KeyMapper(MODEL, BS, 100_000);
  const c = newMapperCounters();
  const t0 = performance.now();
  for (const p of payloads) {
    const r = parseVllmBatch(p);
    if (r.ok) mapper.toOps(r.batch.events, c);
  }
  const s = (performance.now() - t0) / 1000;
  return { blockEventsPerSec: Math.round(blocks / s), batches: payloads.length, blockEvents: blocks };
}

function request<T>(child: ChildProcess, msg: Msg): Promise<T> {
  return new Promise((resolve) => {
    child.once('message', (r) => resolve(r as T));
    child.send(msg);
  });
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const mb = (b: number): number => Math.round((b / 1048576) * 10) / 10;

/** RSS and heap after a full GC (the npm script runs node with --expose-gc). */
function memorySnapshot(
  phase: string,
  mapEntries: number,
): { phase: string; rssMb: number; heapUsedMb: number; blockMapEntries: number } {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { phase, rssMb: mb(m.rss), heapUsedMb: mb(m.heapUsed), blockMapEntries: mapEntries };
}

/**
 * GPU blocks the index holds per pod (at the pod's current epoch), read straight from Redis: SCAN over the
 * model's block keys, each value `idx=entry,…` (src/index/lua/entry.ts).
 */
async function indexHeld(client: Redis, base: string): Promise<number[]> {
  const pods = await client.hgetall(`${base}${KEY_SUFFIX.pods}`);
  const live = new Map<string, { pod: number; epoch: number }>();
  for (const [podId, ref] of Object.entries(pods)) {
    const [idx, epoch] = ref.split(':');
    live.set(idx!, { pod: Number(podId.slice(4)), epoch: Number(epoch) });
  }
  const counts = new Array<number>(PODS).fill(0);
  const rc = 2 ** ENTRY.rcBits;
  const ep = 2 ** ENTRY.epochBits;
  let cursor = '0';
  do {
    const [next, keys] = await client.scanBuffer(
      cursor,
      'MATCH',
      `${base}${KEY_SUFFIX.block}*`,
      'COUNT',
      2000,
    );
    cursor = next.toString();
    if (keys.length === 0) continue;
    for (const v of await client.mgetBuffer(...keys)) {
      for (const e of v?.toString().split(',') ?? []) {
        const [idx, raw] = e.split('=');
        const p = live.get(idx!);
        const entry = Number(raw);
        if (p && entry % rc > 0 && Math.floor(entry / rc) % ep === p.epoch) counts[p.pod]!++;
      }
    }
  } while (cursor !== '0');
  return counts;
}

const progress = (m: string): void => void process.stderr.write(`[bench:collector] ${m}\n`);

async function main(): Promise<void> {
  progress('starting redis-server and publishers');
  const redis = await startRedisServer();
  const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: 'bench' });
  const stop = (): void => void redis.kill().finally(() => process.exit(130));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const probe = new Redis(redis.url);
  /** redis-server's own CPU seconds (user + sys), from INFO: shows when Redis is the bottleneck. */
  const redisCpu = async (): Promise<number> => {
    const info = await probe.info('cpu');
    const v = (k: string): number => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)?.[1] ?? 0);
    return v('used_cpu_user') + v('used_cpu_sys');
  };
  const child = fork(fileURLToPath(import.meta.url), ['--publisher'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { endpoints } = await request<{ endpoints: [string, string][] }>(child, { cmd: 'init', pods: PODS });

  const settings = {
    ...validateConfig(CollectorSectionSchema, {}, 'bench'),
    block_map_max_entries: 100_000,
  };
  let lags: number[] | null = null;
  const newCollector = (handoff: boolean): Collector =>
    new Collector(
      { ...settings, handoff },
      {
        index,
        discovery: new StaticDiscovery(
          endpoints.map(([ep, rep], i) => ({
            id: `pod-${i}`,
            model: MODEL,
            address: `127.0.0.1:${9000 + i}`,
            kv_events: ep,
            kv_events_replay: rep,
          })),
        ),
        log: silentLogger,
        blockSizes: { [MODEL]: BS },
        onApplied: (_pod, batches, appliedAtMs) => {
          if (lags) for (const b of batches) if (b.seq >= 0) lags.push(appliedAtMs - b.tsMs);
        },
      },
    );
  let collector = newCollector(true);
  await collector.start();
  progress('collector started; waiting for subscriptions');
  const workers = (): ReturnType<Collector['workers']> => collector.workers();
  // ZMQ slow joiner: probe until every stream has ingested a batch.
  for (;;) {
    await request(child, { cmd: 'probe' });
    if ([...workers()].every((w) => w.stats.batches > 0 && !w.resyncing)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const totals = (): { blocks: number; batches: number; ops: number; queued: number } => {
    let blocks = 0;
    let batches = 0;
    let ops = 0;
    let queued = 0;
    for (const w of workers()) {
      blocks += w.stats.storedBlocks + w.stats.removedBlocks;
      batches += w.stats.appliedBatches;
      ops += w.stats.appliedOps;
      queued += w.queue.queuedBatches + w.inboxLength;
    }
    return { blocks, batches, ops, queued };
  };
  /** Waits until nothing is queued; false if that takes longer than 60 s (the collector fell behind). */
  const drained = async (): Promise<boolean> => {
    const deadline = Date.now() + 60_000;
    while (totals().queued > 0) {
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 5));
    }
    return true;
  };

  const entries = (): number => [...workers()].reduce((a, w) => a + w.mapper.size, 0);
  const memory = [memorySnapshot('subscribed', entries())];

  // Phase 1: lag at a fixed 20k block events/s.
  progress(`lag phase: ${LAG_RATE} block events/s for ${LAG_SECONDS}s`);
  lags = [];
  const lagRun = await request<{ batches: number; blocks: number; seconds: number }>(child, {
    cmd: 'run',
    rate: LAG_RATE,
    seconds: LAG_SECONDS,
  });
  await drained();
  const sortedLags = [...lags].sort((a, b) => a - b);
  lags = null;
  const lag = {
    offeredBlockEventsPerSec: Math.round(lagRun.blocks / lagRun.seconds),
    batches: sortedLags.length,
    p50Ms: percentile(sortedLags, 50),
    p90Ms: percentile(sortedLags, 90),
    p99Ms: percentile(sortedLags, 99),
    maxMs: sortedLags[sortedLags.length - 1] ?? Number.NaN,
  };
  memory.push(memorySnapshot('after lag phase', entries()));

  // Phase 2: throughput at stepped offered loads.
  const throughput = [];
  for (const rate of THROUGHPUT_RATES) {
    progress(`throughput phase: offered ${rate} block events/s for ${THROUGHPUT_SECONDS}s`);
    const before = totals();
    const cpu0 = process.cpuUsage();
    const rcpu0 = await redisCpu();
    const calls0 = [...workers()].reduce((a, w) => a + w.stats.applyCalls, 0);
    const t0 = performance.now();
    const run = await request<{ batches: number; blocks: number; seconds: number }>(child, {
      cmd: 'run',
      rate,
      seconds: THROUGHPUT_SECONDS,
    });
    const caughtUp = await drained();
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const rcpu = (await redisCpu()) - rcpu0;
    const calls = [...workers()].reduce((a, w) => a + w.stats.applyCalls, 0) - calls0;
    const after = totals();
    const gaps = [...workers()].reduce((a, w) => a + w.stats.gaps, 0);
    throughput.push({
      offeredBlockEventsPerSec: Math.round(run.blocks / run.seconds),
      achievedBlockEventsPerSec: Math.round((after.blocks - before.blocks) / wall),
      indexOpsPerSec: Math.round((after.ops - before.ops) / wall),
      blockEvents: after.blocks - before.blocks,
      published: run.blocks,
      drainSeconds: Math.round((wall - run.seconds) * 100) / 100,
      collectorCpuCores: Math.round(((cpu.user + cpu.system) / 1e6 / wall) * 100) / 100,
      redisCpuCores: Math.round((rcpu / wall) * 100) / 100,
      opsPerIndexWrite: Math.round((after.ops - before.ops) / Math.max(1, calls)),
      gapsSoFar: gaps,
      caughtUp,
    });
    progress(JSON.stringify(throughput[throughput.length - 1]));
    memory.push(memorySnapshot(`after ${rate}/s`, entries()));
  }

  // Phase 3: clean restarts, with and without the handoff.
  const restarts = [];
  for (const handoff of [true, false]) {
    progress(
      `restart phase (handoff ${handoff ? 'on' : 'off'}): quiet load, stop, ${DOWN_SECONDS}s down, start`,
    );
    await request(child, { cmd: 'run', rate: QUIET_RATE, seconds: QUIET_SECONDS });
    await drained();
    const indexedBefore = await indexHeld(probe, modelKeyBase('bench', MODEL));
    const t0 = performance.now();
    await collector.stop(); // a handoff-on collector: it leaves its handoffs either way
    const stopMs = Math.round(performance.now() - t0);
    await request(child, { cmd: 'run', rate: QUIET_RATE, seconds: DOWN_SECONDS });
    const truth = await request<{ held: number[]; lastSeqs: number[] }>(child, { cmd: 'held' });
    const t1 = performance.now();
    collector = newCollector(handoff);
    await collector.start();
    const deadline = Date.now() + 60_000;
    const caughtUp = (): boolean => {
      const ws = [...workers()];
      return (
        ws.length === PODS &&
        ws.every(
          (w) =>
            w.lastSeq === truth.lastSeqs[Number(w.pod.podId.slice(4))] &&
            !w.resyncing &&
            w.queue.queuedBatches === 0 &&
            w.inboxLength === 0,
        )
      );
    };
    while (!caughtUp() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    const catchUpMs = Math.round(performance.now() - t1);
    const indexed = await indexHeld(probe, modelKeyBase('bench', MODEL));
    const held = truth.held.reduce((a, b) => a + b, 0);
    const ws = [...workers()];
    restarts.push({
      handoff,
      cachedBlocks: held,
      indexedBefore: indexedBefore.reduce((a, b) => a + b, 0),
      indexedAfter: indexed.reduce((a, b) => a + b, 0),
      indexedShare: Math.round((indexed.reduce((a, b) => a + b, 0) / held) * 1000) / 1000,
      stopMs,
      catchUpMs,
      caughtUp: caughtUp(),
      resumed: ws.reduce((a, w) => a + w.stats.handoffTakes.resumed, 0),
      cleared: ws.reduce((a, w) => a + w.stats.podClears.start + w.stats.podClears.gap, 0),
    });
    progress(JSON.stringify(restarts[restarts.length - 1]));
  }

  // Last, so its second of blocked event loop cannot disturb the phases above.
  progress('cpu-only phase: decode + key on this thread');
  cpuOnlyCapacity(); // warm-up (JIT)
  const cpuOnly = cpuOnlyCapacity();

  const skipped = [...workers()].reduce<Record<string, number>>((acc, w) => {
    for (const [k, v] of Object.entries(w.stats.skipped)) acc[k] = (acc[k] ?? 0) + v;
    return acc;
  }, {});

  await new Promise((r) => {
    child.once('exit', r);
    child.send({ cmd: 'exit' } satisfies Msg);
  });
  await collector.stop();
  probe.disconnect();
  await index.close();
  await redis.stop();

  const result = {
    when: new Date().toISOString(),
    machine: '2 cores shared with other jobs',
    loadAverage1m: loadavg()[0],
    pods: PODS,
    blockMapMaxEntriesPerPod: settings.block_map_max_entries,
    podCapacityBlocks: POD_CAPACITY_BLOCKS,
    lag,
    cpuOnly,
    throughput,
    restarts,
    memory,
    skipped,
  };
  console.log('\nEvent-to-index lag at a fixed load');
  console.table([lag]);
  console.log('Decode + key on one thread, no I/O (the collector’s own per-core capacity)');
  console.table([cpuOnly]);
  console.log('Sustained ingest (block events decoded, keyed and written to Redis)');
  console.table(throughput);
  console.log(
    `Clean collector restart after ${QUIET_SECONDS} s at ${QUIET_RATE} block events/s (replay buffers of ${REPLAY_BUFFER_BATCHES} batches), ${DOWN_SECONDS} s down`,
  );
  console.table(restarts);
  console.log('Memory after the run');
  console.table(memory);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/collector.json', `${JSON.stringify(result, null, 2)}\n`);
  console.log('wrote bench/results/collector.json');
}

if (process.argv[2] === '--publisher') void publisherMain();
else
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
