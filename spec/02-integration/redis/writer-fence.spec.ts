import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import {
  LeaseLostError,
  RedisKvIndex,
  createKvIndex,
  formatLeaseHolder,
  type IndexLossReason,
  type IndexOp,
  type LeaseHolder,
  type PodRef,
} from '../../../src/index/index.js';
import { modelKeyBase, writerLeaseKey } from '../../../src/index/redis-keys.js';
import { applyCalls, removePodCall, upsertPodCall } from '../../../src/index/script-args.js';
import { chain } from '../../conformance/chains.js';
import { describeKvIndexConformance } from '../../conformance/kv-index.js';
import { waitFor } from '../../helpers/ports.js';
import type { RedisServer } from '../../../harness/redis-server.js';
import { startClusterNode } from '../../helpers/redis-cluster.js';
import { rejection, useRedisIndexes } from '../../helpers/redis-indexes.js';

/**
 * The writer fence (src/index/lua/fence.ts): an index created with the collector's lease holder value
 * checks, inside every write script, that the model's lease key still holds that value. A collector that
 * lost its lease (frozen past the TTL while a standby took over) cannot write, even before its renewal
 * notices. Real redis-server, raw keys checked.
 */
const fx = useRedisIndexes('fence', { verifyIntervalMs: 0 });
const index = fx.index.bind(fx);

const M = 'Qwen/Qwen3-8B';
const A: PodRef = { model: M, podId: 'pod-a' };
const B: PodRef = { model: M, podId: 'pod-b' };
const C: PodRef = { model: M, podId: 'pod-c' };
const keys = chain('writer fence', 12);
const store = (from: number, to: number): IndexOp[] => [
  { op: 'store', keys: keys.slice(from, to), tier: 'GPU' },
];

const ME: LeaseHolder = { id: 'w-me', host: 'here', pid: 1 };
const OTHER: LeaseHolder = { id: 'w-other', host: 'elsewhere', pid: 2 };
const meValue = formatLeaseHolder(ME);
const otherValue = formatLeaseHolder(OTHER);

/** The rejection of a write refused by the fence, checked: the new code, naming the holder. */
async function refused(p: Promise<unknown>): Promise<LeaseLostError> {
  const e = await rejection(p);
  expect(e).toBeInstanceOf(LeaseLostError);
  expect(isKinferenceError(e, 'KINF_ERR_LEASE_LOST')).toBe(true);
  const err = e as LeaseLostError;
  expect(err.model).toBe(M);
  expect(err.holder).toEqual(OTHER);
  expect(err.message).toContain('w-other (host elsewhere, pid 2)');
  return err;
}

/** Every key of the model and its value (DUMP), except the lease itself: what a write could change. */
async function modelKeys(client: Redis, base: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const lease = writerLeaseKey(base);
  for (const k of await client.keysBuffer(`${base}*`)) {
    const name = k.toString('latin1');
    if (name === lease) continue;
    out.set(name, (await client.dumpBuffer(k))!.toString('hex'));
  }
  return out;
}

async function gpu(ix: RedisKvIndex, pod: PodRef): Promise<number> {
  return (await ix.lookup(M, keys)).pods.find((p) => p.state.podId === pod.podId)?.prefixBlocks.GPU ?? -1;
}

function losses(ix: RedisKvIndex, pod: PodRef): IndexLossReason[] {
  const seen: IndexLossReason[] = [];
  ix.onWritesLost(pod, (r) => seen.push(r));
  return seen;
}

describe('RedisKvIndex with a writer fence', () => {
  it('writes while the lease key holds its value; once another holds it, refuses every write and changes nothing', async () => {
    const ix = index({ fence: { holderValue: meValue } });
    const base = ix.keyBase(M);
    const lease = writerLeaseKey(base);
    await fx.redis.client.set(lease, meValue, 'PX', 60_000);
    const seen = losses(ix, A);
    await ix.upsertPodState(A, { address: '10.0.0.1:8000' });
    await ix.upsertPodState(B, { address: '10.0.0.2:8000' });
    await ix.apply(A, store(0, 8));
    await ix.apply(B, store(0, 4));
    expect([await gpu(ix, A), await gpu(ix, B)]).toEqual([8, 4]);

    // A standby took over: the key now names it.
    expect(await ix.saveHandoff(B, 'a clean stop')).toBe(true);
    await fx.redis.client.set(lease, otherValue, 'PX', 60_000);
    const before = await modelKeys(fx.redis.client, base);
    expect(before.size).toBeGreaterThan(8);
    await refused(ix.apply(A, store(8, 12))); // store on top of a confirmed apply (it has a floor)…
    await refused(ix.apply(A, [{ op: 'remove', keys: keys.slice(0, 8), tier: 'GPU' }]));
    await refused(ix.apply(A, [{ op: 'clear' }, ...store(0, 2)]));
    // …a first write to a pod (no floor: the lost-write check alone would let it through)…
    await refused(ix.apply(C, store(0, 12)));
    await refused(ix.upsertPodState(A, { running: 5, healthy: false }));
    await refused(ix.upsertPodState(C, { address: '10.0.0.3:8000' })); // would register C
    await refused(ix.removePod(B));
    await refused(ix.saveHandoff(A, 'a stale collector state'));
    await refused(ix.takeHandoff(B)); // it deletes the record
    expect(await modelKeys(fx.redis.client, base)).toEqual(before);
    expect(await fx.redis.client.get(lease)).toBe(otherValue);
    const pods = (await ix.lookup(M, keys)).pods;
    expect(pods.map((p) => [p.state.podId, p.state.address, p.state.running, p.prefixBlocks.GPU])).toEqual([
      ['pod-a', '10.0.0.1:8000', 0, 8],
      ['pod-b', '10.0.0.2:8000', 0, 4],
    ]);
    // A refusal is not a lost write: nothing reported, the floor kept. With the lease ours again (only a
    // test does that), the next apply is checked against the same floor and accepted.
    expect(seen).toEqual([]);
    await fx.redis.client.set(lease, meValue, 'PX', 60_000);
    await ix.apply(A, [{ op: 'remove', keys: keys.slice(7, 8), tier: 'GPU' }]);
    expect(await gpu(ix, A)).toBe(7);
    expect(seen).toEqual([]);
  });

  it('refuses a split apply at its first part, and a value it did not write is named as it is', async () => {
    const ix = index({ fence: { holderValue: meValue }, maxKeysPerCall: 2 });
    const base = ix.keyBase(M);
    await fx.redis.client.set(writerLeaseKey(base), 'not-json');
    const before = await modelKeys(fx.redis.client, base);
    const e = await rejection(ix.apply(A, store(0, 12))); // 6 calls
    expect(isKinferenceError(e, 'KINF_ERR_LEASE_LOST')).toBe(true);
    expect((e as LeaseLostError).holder).toEqual({ id: 'not-json', host: null, pid: null });
    expect(await modelKeys(fx.redis.client, base)).toEqual(before);
    expect(before.size).toBe(0);
  });

  it('lets writes through while the lease key is missing (Redis restarted empty: the keeper takes it back)', async () => {
    // Refusing here would stall every write after an empty restart, and make the collector exit as if
    // another had taken over; its keeper re-takes the key within ttl/3 (at once after a reconnection).
    const ix = index({ fence: { holderValue: meValue } });
    const lease = writerLeaseKey(ix.keyBase(M));
    expect(await fx.redis.client.exists(lease)).toBe(0);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store(0, 4));
    await ix.upsertPodState(B, {});
    await ix.removePod(B);
    expect(await gpu(ix, A)).toBe(4);
    expect(await fx.redis.client.exists(lease)).toBe(0); // the fence only reads the key, never writes it
    // …until a holder appears that is not us.
    await fx.redis.client.set(lease, otherValue);
    await refused(ix.apply(A, store(4, 6)));
    expect(await gpu(ix, A)).toBe(4);
  });

  it('an unfenced index writes as before whatever the lease key holds, next to a fenced one that is refused', async () => {
    const prefix = 'fence-side';
    const plain = index({ keyPrefix: prefix });
    const fenced = index({ keyPrefix: prefix, fence: { holderValue: meValue } });
    const lease = writerLeaseKey(plain.keyBase(M));
    await fx.redis.client.set(lease, otherValue);
    await refused(fenced.upsertPodState(A, {}));
    await refused(fenced.apply(A, store(0, 4)));
    expect((await plain.lookup(M, keys)).pods).toEqual([]);
    await plain.upsertPodState(A, { address: '10.0.0.1:8000' });
    await plain.apply(A, store(0, 6));
    await plain.apply(A, [{ op: 'remove', keys: keys.slice(5, 6), tier: 'GPU' }]);
    await plain.upsertPodState(B, {});
    await plain.removePod(B);
    const pods = (await plain.lookup(M, keys)).pods;
    expect(pods.map((p) => [p.state.podId, p.state.address, p.prefixBlocks.GPU])).toEqual([
      ['pod-a', '10.0.0.1:8000', 5],
    ]);
    expect(await fx.redis.client.get(lease)).toBe(otherValue);
    // Unfenced calls are the calls of before the fence: no lease key among their KEYS.
    const base = plain.keyBase(M);
    expect(applyCalls(base, 'p', 0, store(0, 1), 10, { writer: 'w', seq: 1 })[0]!.keys).not.toContain(lease);
    expect(upsertPodCall(base, 'p', {}).keys).not.toContain(lease);
    expect(removePodCall(base, 'p').keys).not.toContain(lease);
  });

  it('costs no extra round trip: one EVALSHA per write, the lease read inside the script', async () => {
    const ix = index({ fence: { holderValue: meValue } });
    await fx.redis.client.set(writerLeaseKey(ix.keyBase(M)), meValue);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store(0, 4)); // scripts loaded now
    await fx.redis.client.config('RESETSTAT');
    await ix.upsertPodState(A, { running: 1 });
    await ix.apply(A, store(4, 8));
    await ix.removePod(A);
    const stats = await fx.redis.client.info('commandstats');
    expect(stats).toMatch(/cmdstat_evalsha:calls=3,.*failed_calls=0/);
    expect(stats).not.toMatch(/cmdstat_eval:|cmdstat_script/);
  });

  it('refuses bad fence options', () => {
    expect(() => index({ fence: { holderValue: '' } })).toThrow(
      expect.objectContaining({ code: 'KINF_ERR_CONFIG' }),
    );
  });
});

// The fenced layouts (one KEY and one ARGV more, the op pairs and state fields shifted by one) hold the
// whole contract while this process holds the lease.
let confN = 0;
describeKvIndexConformance('RedisKvIndex, fenced, holding the writer lease', async () => {
  const keyPrefix = `fconf${++confN}`;
  for (const m of [M, 'meta-llama/Llama-3.1-8B'])
    await fx.redis.client.set(writerLeaseKey(modelKeyBase(keyPrefix, m)), meValue);
  return createKvIndex({
    kind: 'redis',
    url: fx.redis.url,
    keyPrefix,
    lookupTimeoutMs: 5000,
    verifyIntervalMs: 0,
    fence: { holderValue: meValue },
  });
});

/**
 * Redis Cluster: a script may only declare KEYS of one slot (CROSSSLOT otherwise), and Redis 7 refuses a
 * script that touches a key of another slot. One cluster-enabled redis-server that serves every slot runs
 * the fenced scripts as a Cluster shard would.
 */
describe('the writer fence on a Redis Cluster node', () => {
  let dir: string;
  let node: RedisServer;
  let client: Redis;
  let url: string;
  const open: RedisKvIndex[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kinf-fence-cluster-'));
    node = await startClusterNode(dir, 'node');
    url = `redis://127.0.0.1:${node.port}`;
    client = new Redis(node.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    await client.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    await waitFor('cluster state ok', async () =>
      /cluster_state:ok/.test(String(await client.call('CLUSTER', 'INFO'))),
    );
  });

  afterAll(async () => {
    await Promise.all(open.map((ix) => ix.close()));
    client?.disconnect();
    await node?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('declares the lease key in the slot of the other KEYS of every fenced call', async () => {
    const base = modelKeyBase('kinf', M);
    const calls = [
      ...applyCalls(base, 'p', 0, store(0, 4), 2, { writer: 'w', seq: 1 }, null, meValue),
      upsertPodCall(base, 'p', { running: 1 }, meValue),
      removePodCall(base, 'p', meValue),
    ];
    for (const call of calls) {
      expect(call.keys).toContain(writerLeaseKey(base));
      const slots = await Promise.all(call.keys.map((k) => client.call('CLUSTER', 'KEYSLOT', k)));
      expect(new Set(slots).size).toBe(1);
    }
  });

  it('runs the fenced scripts on the node, and refuses another holder there too', async () => {
    const ix = new RedisKvIndex({
      url,
      keyPrefix: 'kc',
      fence: { holderValue: meValue },
      verifyIntervalMs: 0,
    });
    open.push(ix);
    const lease = writerLeaseKey(ix.keyBase(M));
    await client.set(lease, meValue);
    await ix.upsertPodState(A, {});
    await ix.apply(A, store(0, 6));
    await ix.upsertPodState(B, {});
    await ix.removePod(B);
    expect(await gpu(ix, A)).toBe(6);
    await client.set(lease, otherValue);
    const before = await modelKeys(client, ix.keyBase(M));
    await refused(ix.apply(A, store(6, 12)));
    await refused(ix.upsertPodState(C, {}));
    await refused(ix.removePod(A));
    expect(await modelKeys(client, ix.keyBase(M))).toEqual(before);
    expect(await gpu(ix, A)).toBe(6);
  });
});
