// bench:index-pods — one model's lookup cost and memory as its pod count grows (8 … 256 pods, one slot).
/**
 * For each pod count P (default 8, 64, 256), on a fresh redis-server (started here): P pods registered
 * with a state record, each holding a 1,000-block prompt of its own that starts with a 200-block system
 * prompt shared by every pod (so P × 1,000 (block, pod) entries, 200 + P × 800 block keys). Then lookups of
 * 1,000-block prompts, one call at a time, three shapes: a pod's own prompt (every pod matches 200 blocks,
 * one matches 1,000), a new prompt on the system prompt (every pod 200), an unseen prompt (no pod).
 * Measures Redis server time per lookup (INFO commandstats, EVALSHA usec_per_call after CONFIG RESETSTAT),
 * the round trip from Node, the pods in the reply, and bytes per entry (INFO used_memory delta). Prints a table
 * and writes bench/results/index-pods.json. Run: npm run bench:index-pods [-- --pods 8,64,256]
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { keyFromWords } from '../src/core/block-keys.js';
import type { BlockKey } from '../src/core/types.js';
import { RedisKvIndex, type PodRef } from '../src/index/index.js';
import { startRedisServer } from '../harness/redis-server.js';
import { benchArgs } from './lib/cli.js';

const USAGE = `npm run bench:index-pods -- [--pods 8,64,256] [--lookups N]
One model's index on a fresh redis-server per pod count: P pods, each with a 1,000-block prompt starting with
a 200-block system prompt every pod shares. Redis server time and round trip of 1,000-block lookups (three
shapes), bytes per entry and per block key. Updates the rows of bench/results/index-pods.json it runs.
  --pods LIST    pod counts (default 8,64,256)
  --lookups N    lookups per shape (default 300)`;
const values = benchArgs('bench:index-pods', USAGE, {
  pods: { type: 'string', default: '8,64,256' },
  lookups: { type: 'string', default: '300' },
});
const MODEL = 'bench/pods';
const SHARED = 200;
const OWN = 800;
const LOOKUPS = Number(values.lookups);
const BATCH = 256;

const sharedKeys: BlockKey[] = Array.from({ length: SHARED }, (_, i) => keyFromWords(0x5eed, i));
const ownKeys = (pod: number, salt = 0): BlockKey[] =>
  Array.from({ length: OWN }, (_, i) => keyFromWords(0x10000 + pod * 4 + salt, i));

async function usedMemory(admin: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
}
async function evalsha(admin: Redis): Promise<{ calls: number; usecPerCall: number }> {
  const m = /cmdstat_evalsha:calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/.exec(
    await admin.info('commandstats'),
  );
  return { calls: Number(m?.[1] ?? 0), usecPerCall: Number(m?.[2] ?? NaN) };
}
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const r1 = (v: number): number => Math.round(v * 10) / 10;

interface Row {
  pods: number;
  entries: number;
  blockKeys: number;
  bytesPerEntry: number;
  bytesPerBlockKey: number;
  fillOpsPerSec: number;
  lookups: Record<
    string,
    { serverUsP50: number; serverUsMean: number; roundTripMsP50: number; replyPods: number }
  >;
}

async function measure(P: number): Promise<Row> {
  const redis = await startRedisServer();
  const admin = new Redis(redis.url, { lazyConnect: false });
  const ix = new RedisKvIndex({
    url: redis.url,
    keyPrefix: 'bp',
    lookupTimeoutMs: 10_000,
    commandTimeoutMs: 60_000,
    blockTtlSeconds: 86_400,
  });
  try {
    const pods: PodRef[] = Array.from({ length: P }, (_, i) => ({ model: MODEL, podId: `pod-${i}` }));
    await Promise.all(
      pods.map((p, i) =>
        ix.upsertPodState(p, {
          address: `10.0.${i >> 8}.${i & 255}:8000`,
          healthy: true,
          running: 3,
          waiting: 0,
        }),
      ),
    );
    const before = await usedMemory(admin);
    const t0 = performance.now();
    // Ten pods' queues at a time (the collector writes each pod in order, pods in parallel).
    for (let g = 0; g < P; g += 10)
      await Promise.all(
        pods.slice(g, g + 10).map(async (p, j) => {
          const keys = [...sharedKeys, ...ownKeys(g + j)];
          for (let k = 0; k < keys.length; k += BATCH)
            await ix.apply(p, [{ op: 'store', tier: 'GPU', keys: keys.slice(k, k + BATCH) }]);
        }),
      );
    const fillS = (performance.now() - t0) / 1000;
    const entries = P * (SHARED + OWN);
    const blockKeys = SHARED + P * OWN;
    const bytes = (await usedMemory(admin)) - before;
    const shapes: Record<string, (i: number) => BlockKey[]> = {
      'own prompt': (i) => [...sharedKeys, ...ownKeys(i % P)],
      'system prompt, new turn': (i) => [...sharedKeys, ...ownKeys(i, 3)],
      unseen: (i) => [...ownKeys(i, 2), ...sharedKeys],
    };
    const lookups: Row['lookups'] = {};
    for (const [name, prompt] of Object.entries(shapes)) {
      await ix.lookup(MODEL, prompt(0)); // script loaded
      await admin.config('RESETSTAT');
      const rtt: number[] = [];
      const server: number[] = [];
      let replyPods = 0;
      for (let i = 0; i < LOOKUPS; i++) {
        const before = await evalsha(admin);
        const t = performance.now();
        const r = await ix.lookup(MODEL, prompt(i));
        rtt.push(performance.now() - t);
        const after = await evalsha(admin);
        server.push(after.usecPerCall * after.calls - before.usecPerCall * before.calls);
        replyPods = r.pods.length;
      }
      const total = await evalsha(admin);
      lookups[name] = {
        serverUsP50: Math.round(pct(server, 50)),
        serverUsMean: Math.round(total.usecPerCall),
        roundTripMsP50: Math.round(pct(rtt, 50) * 100) / 100,
        replyPods,
      };
    }
    return {
      pods: P,
      entries,
      blockKeys,
      bytesPerEntry: r1(bytes / entries),
      bytesPerBlockKey: r1(bytes / blockKeys),
      fillOpsPerSec: Math.round(entries / fillS),
      lookups,
    };
  } finally {
    await ix.close();
    admin.disconnect();
    await redis.stop();
  }
}

const OUT = 'bench/results/index-pods.json';
// Rows of other pod counts already in the file are kept: `--pods 1000` alone updates the 1,000-pod row.
let rows: (Row & { loadAverage1m: number; when: string })[] = [];
try {
  const old = JSON.parse(readFileSync(OUT, 'utf8')) as {
    rows: typeof rows;
    when?: string;
    loadAverage1m?: number;
  };
  // A file of the first version carried one load average and date for all its rows.
  rows = old.rows.map((r) => ({
    ...r,
    loadAverage1m: r.loadAverage1m ?? old.loadAverage1m,
    when: r.when ?? old.when,
  }));
} catch {
  rows = [];
}
for (const P of values.pods.split(',').map(Number)) {
  const row = await measure(P);
  rows = [
    ...rows.filter((r) => r.pods !== P),
    { ...row, loadAverage1m: Number(loadavg()[0]!.toFixed(1)), when: new Date().toISOString() },
  ].sort((a, b) => a.pods - b.pods);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(OUT, JSON.stringify({ machine: '2 cores shared with other jobs', rows }, null, 2) + '\n');
  const l = Object.entries(row.lookups)
    .map(
      ([k, v]) =>
        `${k}: ${v.serverUsP50} µs server p50 (mean ${v.serverUsMean}), ${v.roundTripMsP50} ms round trip`,
    )
    .join('; ');
  console.log(
    `${P} pods, ${row.entries} entries: ${row.bytesPerEntry} B/entry (${row.bytesPerBlockKey} B/block key), ` +
      `fill ${row.fillOpsPerSec} block ops/s; ${l}; load average ${loadavg()[0]!.toFixed(1)}`,
  );
}
console.log(`wrote ${OUT}`);
