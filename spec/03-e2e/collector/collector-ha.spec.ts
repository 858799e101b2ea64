import { describe, expect, it } from 'vitest';
import { runCollectorHa } from '../../../bench/lib/collector-ha/run.js';

/**
 * Collector HA under traffic (bench/lib/collector-ha; `npm run bench:collector-ha` runs it for figures): real
 * `kinference collector` processes, a real redis-server, emulated pods publishing KV events over ZMQ (PUB +
 * replay ROUTER). The lease holder is SIGKILLed while the pods publish; the standby must take over within the
 * lease TTL (plus its retry interval, ttl/3), and the index must then equal the model of the pods' caches,
 * and hold nothing once every chain is evicted (a block counted twice would stay credited).
 * The single-shard run takes about 30 s at load average 20 on 2 cores, the two-shard one longer (four
 * collector processes start). Every wait inside is bounded (startMs, waitMs), and the test's timeout is
 * above their sum, so the scenario always cleans its processes up itself.
 */
const LEASE_MS = 2000;
// The lease expires at most LEASE_MS after the kill, and the standby retries every LEASE_MS / 3; the rest
// is this loaded 2-core machine (process scheduling, polling every 10 ms).
const TAKEOVER_BOUND_MS = LEASE_MS + LEASE_MS / 3 + 1500;

describe('collector HA: the lease holder killed under traffic (real processes)', () => {
  it('the standby takes over within the lease TTL; the index equals the pods’ caches, nothing counted twice', async () => {
    const r = await runCollectorHa({
      pods: 3,
      leaseMs: LEASE_MS,
      warmupMs: 1000,
      batchesPerSec: 100,
      waitMs: 8000,
      startMs: 40_000,
    });
    expect(r.killToLeaseMs).toBeLessThan(TAKEOVER_BOUND_MS);
    expect(r.killToIndexedMs).toBeLessThan(TAKEOVER_BOUND_MS + 3000);
    expect(r.batches).toBeGreaterThan(100);
    expect(r.mismatches).toEqual([]);
    expect(r.leftAfterEvictingAll).toEqual([]);
  }, 150_000);

  it('two shards: the pods split over two active collectors; one killed, its standby takes its shard over', async () => {
    const r = await runCollectorHa({
      pods: 4,
      shards: 2,
      leaseMs: LEASE_MS,
      warmupMs: 1000,
      batchesPerSec: 100,
      waitMs: 8000,
      startMs: 40_000,
    });
    expect(r.killToLeaseMs).toBeLessThan(TAKEOVER_BOUND_MS);
    expect(r.mismatches).toEqual([]);
    expect(r.leftAfterEvictingAll).toEqual([]);
  }, 150_000);
});
