// Collector HA under traffic: takeover time after the lease holder is SIGKILLed, and the index checked after.
/**
 * ROUNDS times on fresh processes (bench/lib/collector-ha): a redis-server, emulated pods publishing KV
 * events over ZMQ, two `kinference collector` processes per shard (one active, one standing by), traffic on
 * every pod, the active one of shard 0 SIGKILLed under it. Prints kill → lease taken, → standby healthy,
 * → events indexed again, and whether the index then equals the model of the pods' caches (and holds
 * nothing once every chain is evicted). Writes bench/results/collector-ha.json.
 * Run: npm run bench:collector-ha [-- --lease-ms 3000 --pods 8 --shards 1 --rounds 3]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { benchArgs } from './lib/cli.js';
import { runCollectorHa, type CollectorHaReport } from './lib/collector-ha/run.js';

const USAGE = `npm run bench:collector-ha -- [--lease-ms N] [--pods N] [--shards N] [--rounds N] [--rate N]
Two kinference collector processes per shard on emulated pods (KV events over ZMQ) and a real redis-server;
the lease holder of shard 0 SIGKILLed under traffic, ROUNDS times on fresh processes. Prints kill → lease
taken, → standby healthy, → events indexed again, and whether the index equals the pods' caches after.
Writes bench/results/collector-ha.json (collector-ha-shards.json with --shards > 1).
  --lease-ms N   collector.writer_lease_ms (default 3000)
  --pods N       emulated pods (default 8)
  --shards N     collector.shard_count (default 1)
  --rounds N     runs (default 3)
  --rate N       event batches per second over all pods (default 200)`;
const values = benchArgs('bench:collector-ha', USAGE, {
  'lease-ms': { type: 'string', default: '3000' },
  pods: { type: 'string', default: '8' },
  shards: { type: 'string', default: '1' },
  rounds: { type: 'string', default: '3' },
  rate: { type: 'string', default: '200' },
});
const leaseMs = Number(values['lease-ms']);
const rounds: (CollectorHaReport & { loadAverage1m: number })[] = [];
for (let i = 0; i < Number(values.rounds); i++) {
  const r = await runCollectorHa({
    pods: Number(values.pods),
    shards: Number(values.shards),
    leaseMs,
    batchesPerSec: Number(values.rate),
    seed: i + 1,
    log: (l) => console.error(`  round ${i + 1}: ${l}`),
  });
  rounds.push({ ...r, loadAverage1m: Number(loadavg()[0]!.toFixed(2)) });
  console.log(
    `round ${i + 1}: kill → lease ${r.killToLeaseMs} ms, → healthy ${r.killToHealthyMs} ms, → indexed ` +
      `${r.killToIndexedMs} ms (lease TTL ${leaseMs} ms); ${r.batches} batches, ${r.chains} chains; index = model: ` +
      `${r.mismatches.length === 0 ? 'yes' : `NO (${r.mismatches.length})`}; after evicting all: ` +
      `${r.leftAfterEvictingAll.length === 0 ? 'empty' : `NOT EMPTY (${r.leftAfterEvictingAll.length})`}; ` +
      `load average ${loadavg()[0]!.toFixed(1)}`,
  );
}
mkdirSync('bench/results', { recursive: true });
const out = `bench/results/collector-ha${Number(values.shards) > 1 ? '-shards' : ''}.json`;
writeFileSync(
  out,
  JSON.stringify(
    { when: new Date().toISOString(), machine: '2 cores shared with other jobs', rounds },
    null,
    2,
  ) + '\n',
);
console.log(`wrote ${out}`);
