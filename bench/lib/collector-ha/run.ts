// Collector HA under traffic: the lease holder SIGKILLed, the takeover timed, the index checked after.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KvEventPublisher } from '../../../emulator/server/kv-publisher.js';
import type { EngineBlockHash, KvCacheEvent } from '../../../emulator/engine/types.js';
import { freeLoopbackPort, startRedisServer, type RedisServer } from '../../../harness/redis-server.js';
import { waitFor } from '../../../harness/wait-for.js';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import { createKvIndex, type KvIndex } from '../../../src/index/index.js';
import { podShard } from '../../../src/collector/pod-shard.js';
import { CollectorProcess } from '../frame-fuzz/collector-process.js';
import { Rng } from '../rng.js';

export interface CollectorHaOptions {
  /** Emulated pods (each a vLLM ZMQ publisher: PUB + replay ROUTER). Default 4. */
  pods?: number;
  /** `collector.writer_lease_ms` of both collectors. Default 3,000. */
  leaseMs?: number;
  /** Traffic before the kill, ms. Default 1,500. */
  warmupMs?: number;
  /** Event batches per second over all pods (each stores a chain or evicts one). Default 200. */
  batchesPerSec?: number;
  /**
   * `collector.shard_count`: the pods split into this many shards, each with its own active and standby
   * collector (2 × shards processes); the holder of shard 0 is killed. Default 1.
   */
  shards?: number;
  seed?: number;
  /**
   * Longest wait for each step after the kill, ms (default 3 × leaseMs + 20 s): a spec keeps it below its
   * own timeout, so the processes are always cleaned up here.
   */
  waitMs?: number;
  /** Longest wait for each phase's collectors to start, ms (default 60 s: tsx start-up on a loaded host). */
  startMs?: number;
  log?: (line: string) => void;
}

export interface CollectorHaReport {
  pods: number;
  shards: number;
  leaseMs: number;
  /** Event batches published before, during and after the takeover. */
  batches: number;
  /** SIGKILL of the holder → the standby's lease in Redis. */
  killToLeaseMs: number;
  /** SIGKILL → the standby's /healthz answers 200 (it follows every pod). */
  killToHealthyMs: number;
  /** SIGKILL → a chain published on every pod of the killed shard right after the kill is in the index. */
  killToIndexedMs: number;
  /** When traffic stopped: chains whose index entry differs from the model (empty: equal). */
  mismatches: string[];
  /** After every held chain was evicted too: chains the index still credits (double counts), empty: none. */
  leftAfterEvictingAll: string[];
  chains: number;
  blocks: number;
}

const MODEL = 'ha/model';
const BS = 16;
const PREFIX = 'kha';

interface Chain {
  pod: string;
  tokens: number[];
  hashes: EngineBlockHash[];
  held: boolean;
  /** A takeover probe: the traffic never evicts it (its indexing is timed). */
  probe?: boolean;
}

/**
 * Runs the scenario once on fresh processes: a redis-server, `pods` publishers, two `kinference collector`
 * processes per shard on one fleet file (the standby standing by), traffic on every pod, the holder of
 * shard 0 SIGKILLed under it. Reports the takeover times and whether the index then equals the model of
 * the pods' caches, and stays equal (nothing counted twice) when every chain is evicted.
 */
export async function runCollectorHa(o: CollectorHaOptions = {}): Promise<CollectorHaReport> {
  const podCount = o.pods ?? 4;
  const leaseMs = o.leaseMs ?? 3000;
  const shards = o.shards ?? 1;
  const rate = o.batchesPerSec ?? 200;
  const log = o.log ?? (() => {});
  const waitMs = o.waitMs ?? leaseMs * 3 + 20_000;
  // Collector processes start side by side: slow on a loaded machine.
  const startMs = o.startMs ?? 60_000;
  const rng = new Rng(o.seed ?? 1);
  const dir = mkdtempSync(join(tmpdir(), 'kinf-collector-ha-'));
  let redis: RedisServer | null = null;
  let index: KvIndex | null = null;
  const pubs = new Map<string, KvEventPublisher>();
  const procs: CollectorProcess[] = [];
  try {
    redis = await startRedisServer();
    const podLines: string[] = [];
    for (let i = 0; i < podCount; i++) {
      const id = `pod-${i}`;
      const endpoint = `tcp://127.0.0.1:${await freeLoopbackPort()}`;
      const replayEndpoint = `tcp://127.0.0.1:${await freeLoopbackPort()}`;
      const pub = new KvEventPublisher({
        endpoint,
        replayEndpoint,
        topic: 'kv',
        format: 'map',
        hashForm: 'int',
        dataParallelRank: 0,
        bufferSteps: 10_000,
        hwm: 100_000,
      });
      await pub.start();
      pubs.set(id, pub);
      podLines.push(
        `  - id: ${id}`,
        `    model: ${MODEL}`,
        `    address: 127.0.0.1:${19_000 + i}`,
        `    kv_events: ${endpoint}`,
        `    kv_events_replay: ${replayEndpoint}`,
        '    kv_events_topic: kv',
      );
    }
    const fleetFile = async (name: string, shard: number): Promise<CollectorProcess> => {
      const listen = `127.0.0.1:${await freeLoopbackPort()}`;
      const config = join(dir, `${name}.yaml`);
      writeFileSync(
        config,
        [
          `redis_url: ${redis!.url}`,
          `redis_key_prefix: ${PREFIX}`,
          'models:',
          `  ${MODEL}: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: ${BS} }`,
          'pods:',
          ...podLines,
          'collector:',
          `  listen: ${listen}`,
          '  log_level: warn',
          `  writer_lease_ms: ${leaseMs}`,
          '  index_retry_min_ms: 20',
          '  index_retry_max_ms: 200',
          ...(shards > 1 ? [`  shard_index: ${shard}`, `  shard_count: ${shards}`] : []),
          '',
        ].join('\n'),
      );
      const p = new CollectorProcess(config, listen);
      procs.push(p);
      return p;
    };
    index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: PREFIX, lookupTimeoutMs: 5000 });
    const ix = index;

    // The first collector of each shard holds its lease before the second starts: the second stands by.
    // Each phase's collectors start side by side (process start-up is most of a short run's time).
    const shardList = Array.from({ length: shards }, (_, s) => s);
    const active = await Promise.all(
      shardList.map(async (s) => {
        const a = await fleetFile(`a${s}`, s);
        await waitFor(`collector a${s} healthy`, async () => (await a.healthz()) === 200, startMs, 50);
        return a;
      }),
    );
    const standby = await Promise.all(
      shardList.map(async (s) => {
        const b = await fleetFile(`b${s}`, s);
        await waitFor(
          `collector b${s} standing by`,
          async () => {
            const r = await fetch(`http://${b.listen}/healthz`).catch(() => null);
            return r !== null && ((await r.json()) as { standby?: boolean }).standby === true;
          },
          startMs,
          50,
        );
        return b;
      }),
    );
    log(`${2 * shards} collectors up (${shards} active, ${shards} standing by), ${podCount} pods`);

    // The model of the pods' caches: every chain each pod published, and whether it still holds it.
    const chains: Chain[] = [];
    let nextToken = 1;
    let nextHash = 1n;
    let batches = 0;
    const publish = (pod: string, events: KvCacheEvent[]): void => {
      pubs.get(pod)!.publish(events, Date.now() / 1000);
      batches++;
    };
    const store = (pod: string, blocks: number): Chain => {
      const tokens = Array.from({ length: blocks * BS }, () => nextToken++);
      const hashes = Array.from(
        { length: blocks },
        () => (nextHash++).toString(16).padStart(64, '0') as EngineBlockHash,
      );
      publish(pod, [
        {
          type: 'BlockStored',
          blockHashes: hashes,
          parentBlockHash: null,
          tokenIds: tokens,
          blockSize: BS,
          loraId: null,
          loraName: null,
          extraKeys: hashes.map(() => null),
        },
      ]);
      const c = { pod, tokens, hashes, held: true };
      chains.push(c);
      return c;
    };
    const evict = (c: Chain): void => {
      publish(c.pod, [{ type: 'BlockRemoved', blockHashes: [...c.hashes].reverse() }]);
      c.held = false;
    };
    const podIds = [...pubs.keys()];
    const seed = keySeed({ model: MODEL, lora: null, cacheSalt: null });
    const cached = async (c: Chain): Promise<number> => {
      const r = await ix.lookup(MODEL, blockKeys(c.tokens, BS, seed));
      return r.pods.find((p) => p.state.podId === c.pod)?.prefixBlocks.GPU ?? 0;
    };
    const differences = async (): Promise<string[]> => {
      const out: string[] = [];
      for (const [i, c] of chains.entries()) {
        const got = await cached(c);
        const want = c.held ? c.hashes.length : 0;
        if (got !== want) out.push(`${c.pod} chain ${i}: indexed ${got}, cached ${want}`);
      }
      return out;
    };

    // Traffic: paced batches on random pods, three stores for each eviction.
    let running = true;
    const traffic = (async () => {
      const t0 = performance.now();
      for (let i = 0; running; i++) {
        const pod = podIds[rng.int(podIds.length)]!;
        const held = chains.filter((c) => c.pod === pod && c.held && !c.probe);
        if (held.length > 0 && rng.int(4) === 0) evict(held[rng.int(held.length)]!);
        else store(pod, 1 + rng.int(4));
        const wait = t0 + ((i + 1) * 1000) / rate - performance.now();
        if (wait >= 1) await new Promise((r) => setTimeout(r, wait));
      }
    })();
    await new Promise((r) => setTimeout(r, o.warmupMs ?? 1500));

    // The kill, and a probe chain on each of the shard's pods right after it.
    const victim = active[0]!;
    const heir = standby[0]!;
    victim.proc.kill('SIGKILL');
    const killedAt = performance.now();
    const shardPods = podIds.filter((id) => podShard(id, shards) === 0);
    const probes = shardPods.map((id) => Object.assign(store(id, 2), { probe: true }));
    log(`killed the holder of shard 0 (pid ${victim.proc.pid}; ${shardPods.length} pods)`);
    await waitFor(
      'the standby holds the lease',
      async () => (await heir.metrics())?.sum('kinference_collector_writer_lease_held') === 1,
      waitMs,
      10,
    );
    const killToLeaseMs = performance.now() - killedAt;
    log(`lease taken ${killToLeaseMs.toFixed(0)} ms after the kill`);
    await waitFor('the standby healthy', async () => (await heir.healthz()) === 200, waitMs, 20);
    const killToHealthyMs = performance.now() - killedAt;
    await waitFor(
      'the probes indexed',
      async () => (await Promise.all(probes.map(cached))).every((n) => n === 2),
      waitMs,
      20,
    ).catch(async (e: unknown) => {
      throw new Error(`${String(e)}; the standby's log: ${heir.stderr.slice(-3000)}`);
    });
    const killToIndexedMs = performance.now() - killedAt;
    log(
      `lease ${killToLeaseMs.toFixed(0)} ms, healthy ${killToHealthyMs.toFixed(0)} ms, ` +
        `indexed ${killToIndexedMs.toFixed(0)} ms after the kill`,
    );
    // More traffic through the new holder, then the comparison with the model.
    await new Promise((r) => setTimeout(r, 500));
    running = false;
    await traffic;
    let mismatches: string[] = [];
    try {
      await waitFor(
        'the index equals the model',
        async () => (await differences()).length === 0,
        waitMs,
        100,
      );
    } catch {
      mismatches = await differences();
    }
    // Evicting every held chain must leave nothing: a block counted twice would stay credited.
    for (const c of chains) if (c.held) evict(c);
    let leftAfterEvictingAll: string[] = [];
    try {
      await waitFor('every chain evicted', async () => (await differences()).length === 0, waitMs, 100);
    } catch {
      leftAfterEvictingAll = await differences();
    }
    return {
      pods: podCount,
      shards,
      leaseMs,
      batches,
      killToLeaseMs: Math.round(killToLeaseMs),
      killToHealthyMs: Math.round(killToHealthyMs),
      killToIndexedMs: Math.round(killToIndexedMs),
      mismatches,
      leftAfterEvictingAll,
      chains: chains.length,
      blocks: chains.reduce((n, c) => n + c.hashes.length, 0),
    };
  } finally {
    for (const p of procs) if (p.alive) p.proc.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.stop()));
    await Promise.all([...pubs.values()].map((p) => p.close()));
    await index?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
