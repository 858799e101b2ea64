import { createServer, type Server, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import type { BlockKey } from '../../../src/core/types.js';
import { RedisKvIndex, type PodRef } from '../../../src/index/index.js';
import { packEntry } from '../../../src/index/lua/entry.js';
import { LOOKUP_STATE_KEYS_PER_MGET } from '../../../src/index/lua/lookup.js';
import { SCRIPTS } from '../../../src/index/redis-scripts.js';
import { KEY_SUFFIX, blockRedisKey, modelTag } from '../../../src/index/redis-keys.js';
import { chain } from '../../conformance/chains.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { rejection, useRedisIndexes } from '../../helpers/redis-indexes.js';

const fx = useRedisIndexes('it');
const index = fx.index.bind(fx);

const M = 'Qwen/Qwen3-8B';
const A: PodRef = { model: M, podId: 'pod-a' };
const B: PodRef = { model: M, podId: 'pod-b' };
const keys = chain('integration prompt', 32);

function rawBlockKey(ix: RedisKvIndex, key: BlockKey): Buffer {
  return blockRedisKey(ix.keyBase(M), Buffer.from(key, 'hex'));
}

describe('RedisKvIndex scripts', () => {
  it('runs every operation as EVALSHA, never EVAL', async () => {
    const ix = index();
    await ix.upsertPodState(A, {});
    await ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }]);
    await ix.lookup(M, keys); // scripts loaded now
    await fx.redis.client.config('RESETSTAT');
    await ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }]);
    await ix.lookup(M, keys);
    const stats = await fx.redis.client.info('commandstats');
    expect(stats).toMatch(/cmdstat_evalsha:calls=2,.*failed_calls=0/);
    expect(stats).not.toMatch(/cmdstat_eval:|cmdstat_script/);
  });

  it('recovers from NOSCRIPT (SCRIPT FLUSH) by running the script once by its source, which caches it', async () => {
    await fx.redis.client.script('FLUSH');
    const ix = index();
    await ix.upsertPodState(A, {});
    await ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }]);
    expect(await fx.redis.client.script('EXISTS', SCRIPTS.lookup.sha1, SCRIPTS.apply.sha1)).toEqual([0, 1]);
    await fx.redis.client.script('FLUSH');
    const r = await ix.lookup(M, keys);
    expect(r.pods[0]!.prefixBlocks.GPU).toBe(32);
    await fx.redis.client.script('FLUSH');
    await ix.apply(A, [{ op: 'remove', keys: keys.slice(10), tier: 'GPU' }]);
    await fx.redis.client.script('FLUSH');
    await ix.upsertPodState(B, { running: 1 });
    expect((await ix.lookup(M, keys)).pods.map((p) => p.prefixBlocks.GPU)).toEqual([10, 0]);
    expect(
      await fx.redis.client.script('EXISTS', SCRIPTS.lookup.sha1, SCRIPTS.upsertPod.sha1, SCRIPTS.apply.sha1),
    ).toEqual([1, 1, 0]);
  });

  it('reads the states of more pods than one MGET carries, in chunks, none lost at a chunk edge', async () => {
    // 1,001 pods written at once queue on one connection: budgets for a busy machine, not for Redis.
    const ix = index({ lookupTimeoutMs: 30_000, commandTimeoutMs: 30_000 });
    const n = 2 * LOOKUP_STATE_KEYS_PER_MGET + 1;
    const ids = Array.from({ length: n }, (_, i) => `pod-${String(i).padStart(5, '0')}`);
    await Promise.all(ids.map((podId, i) => ix.upsertPodState({ model: M, podId }, { running: i })));
    // The pods hash orders them its own way: give every pod a prefix of its own length, so a state or a
    // prefix read at the wrong chunk offset shows.
    await Promise.all(
      ids.map((podId, i) =>
        ix.apply({ model: M, podId }, [{ op: 'store', keys: keys.slice(0, i % 33), tier: 'GPU' }]),
      ),
    );
    const r = await ix.lookup(M, keys);
    expect(r.pods.map((p) => [p.state.podId, p.state.running, p.prefixBlocks.GPU])).toEqual(
      ids.map((podId, i) => [podId, i, i % 33]),
    );
  });
});

describe('RedisKvIndex key layout', () => {
  it('puts every key of a model under one hash tag and the configured prefix', async () => {
    const ix = index({ keyPrefix: 'myapp:kv' });
    await ix.upsertPodState(A, {});
    await ix.apply(A, [{ op: 'store', keys: keys.slice(0, 3), tier: 'GPU' }]);
    await ix.apply({ model: 'other-model', podId: 'x' }, [
      { op: 'store', keys: keys.slice(0, 1), tier: 'GPU' },
    ]);
    const all = (await fx.redis.client.keysBuffer('myapp:kv:*')).map((k) => k.toString('latin1'));
    const mine = all.filter((k) => k.startsWith(`myapp:kv:{${modelTag(M)}}:`));
    expect(mine).toHaveLength(3 + 4); // 3 blocks, pods, seq, applied, one state record
    expect(all.filter((k) => k.includes(`{${modelTag('other-model')}}`))).toHaveLength(1 + 3);
    // prefix, tag, suffix, then the block key's 8 raw bytes
    const blockLen = `myapp:kv:{${modelTag(M)}}:${KEY_SUFFIX.block}`.length + 8;
    expect(mine.filter((k) => k.includes(`}:${KEY_SUFFIX.block}`)).map((k) => k.length)).toEqual([
      blockLen,
      blockLen,
      blockLen,
    ]);
  });

  it('stores one short string per block: "idx=entry,…", entries packing epoch and refcounts', async () => {
    const ix = index();
    await ix.upsertPodState(A, {});
    await ix.upsertPodState(B, {});
    await ix.apply(A, [{ op: 'store', keys: keys.slice(0, 2), tier: 'GPU' }]);
    await ix.apply(A, [{ op: 'store', keys: keys.slice(0, 1), tier: 'GPU' }]);
    await ix.apply(B, [{ op: 'clear' }, { op: 'store', keys: keys.slice(0, 1), tier: 'CPU' }]);
    const k0 = rawBlockKey(ix, keys[0]!);
    expect(await fx.redis.client.type(k0)).toBe('string');
    expect(await fx.redis.client.object('ENCODING', k0)).toBe('embstr'); // one allocation with its object header
    const entries = (await fx.redis.client.get(k0))!.split(',').map((e) => e.split('=')[1]);
    expect(entries.sort()).toEqual([String(packEntry([2, 0, 0], 0)), String(packEntry([0, 1, 0], 1))].sort());
    expect(await fx.redis.client.get(rawBlockKey(ix, keys[1]!))).toMatch(/^\d+=1$/);
  });

  it('sets the block TTL on store and refreshes it; 0 means no TTL', async () => {
    const withTtl = index({ blockTtlSeconds: 600 });
    await withTtl.apply(A, [{ op: 'store', keys: keys.slice(0, 1), tier: 'GPU' }]);
    const k = rawBlockKey(withTtl, keys[0]!);
    expect(await fx.redis.client.ttl(k)).toBeGreaterThan(590);
    await fx.redis.client.expire(k, 5);
    await withTtl.apply(B, [{ op: 'store', keys: keys.slice(0, 1), tier: 'GPU' }]);
    expect(await fx.redis.client.ttl(k)).toBeGreaterThan(590);
    await fx.redis.client.expire(k, 300);
    await withTtl.apply(B, [{ op: 'remove', keys: keys.slice(0, 1), tier: 'GPU' }]); // A still holds it
    expect(await fx.redis.client.ttl(k)).toBeGreaterThan(200);
    expect(await fx.redis.client.ttl(k)).toBeLessThanOrEqual(300);
    const noTtl = index({ blockTtlSeconds: 0 });
    await noTtl.apply(A, [{ op: 'store', keys: keys.slice(0, 1), tier: 'GPU' }]);
    expect(await fx.redis.client.ttl(rawBlockKey(noTtl, keys[0]!))).toBe(-1);
  });

  it('drops stale entries (cleared epoch, removed pod) when a later write passes their block', async () => {
    const ix = index();
    await ix.upsertPodState(A, {});
    await ix.upsertPodState(B, {});
    const C: PodRef = { model: M, podId: 'pod-c' };
    await ix.apply(A, [{ op: 'store', keys: keys.slice(0, 2), tier: 'GPU' }]);
    await ix.apply(B, [{ op: 'store', keys: keys.slice(0, 2), tier: 'GPU' }]);
    await ix.apply(C, [{ op: 'store', keys: keys.slice(0, 2), tier: 'GPU' }]);
    const k0 = rawBlockKey(ix, keys[0]!);
    const entries = async (k: Buffer) =>
      ((await fx.redis.client.get(k)) ?? '').split(',').filter(Boolean).length;
    expect(await entries(k0)).toBe(3);
    await ix.apply(A, [{ op: 'clear' }]);
    await ix.removePod(B);
    expect(await entries(k0)).toBe(3); // O(1): nothing touched yet
    await ix.apply(C, [{ op: 'remove', keys: keys.slice(0, 1), tier: 'GPU' }]);
    expect(await fx.redis.client.exists(k0)).toBe(0); // C's entry removed, A's and B's stale ones dropped
    expect(await entries(rawBlockKey(ix, keys[1]!))).toBe(3); // untouched block: TTL's job
    // an ignored remove (C does not hold it) still drops stale entries it passes
    await ix.apply(C, [{ op: 'remove', keys: keys.slice(5, 6), tier: 'GPU' }]);
    await ix.apply(A, [{ op: 'store', keys: keys.slice(2, 3), tier: 'GPU' }]);
    await ix.apply(A, [{ op: 'clear' }]);
    await ix.apply(C, [{ op: 'remove', keys: keys.slice(2, 3), tier: 'GPU' }]);
    expect(await fx.redis.client.exists(rawBlockKey(ix, keys[2]!))).toBe(0);
  });
});

describe('RedisKvIndex failure behaviour', () => {
  it('rejects a lookup with KINF_ERR_REDIS_TIMEOUT when Redis does not answer in time', async () => {
    const ix = index({ lookupTimeoutMs: 25 });
    await ix.upsertPodState(A, {});
    await ix.lookup(M, keys); // connected, script loaded
    await fx.redis.client.client('PAUSE', 400, 'ALL');
    const e = await rejection(ix.lookup(M, keys));
    expect(isKinferenceError(e, 'KINF_ERR_REDIS_TIMEOUT')).toBe(true);
    await waitFor('Redis unpaused', async () => (await ix.lookup(M, keys)).pods.length === 1);
  });

  it('rejects at once with KINF_ERR_REDIS while Redis is down, and works again after it restarts', async () => {
    const ix = index({ lookupTimeoutMs: 20_000, commandTimeoutMs: 20_000 });
    await ix.upsertPodState(A, {});
    await ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }]);
    expect((await ix.lookup(M, keys)).pods).toHaveLength(1);
    await fx.redis.kill();
    // Far below the 20 s budget: the code says the connection failed, not that the budget ran out.
    for (const p of [ix.lookup(M, keys), ix.lookup(M, keys)]) {
      const e = await rejection(p);
      expect(isKinferenceError(e, 'KINF_ERR_REDIS')).toBe(true);
    }
    expect(isKinferenceError(await rejection(ix.apply(A, [{ op: 'clear' }])), 'KINF_ERR_REDIS')).toBe(true);
    await fx.redis.restart();
    // The new server is empty and has no scripts: reconnect, NOSCRIPT, EVAL.
    await waitFor('index back after restart', async () => {
      await ix.upsertPodState(A, {});
      return (await ix.lookup(M, keys)).pods.length === 1;
    });
    expect((await ix.lookup(M, keys)).pods[0]!.prefixBlocks.GPU).toBe(0);
  });

  it('rejects with KINF_ERR_REDIS when nothing listens (first use)', async () => {
    const port = await freePort();
    const ix = index({ url: `redis://127.0.0.1:${port}/0`, lookupTimeoutMs: 20_000 });
    expect(isKinferenceError(await rejection(ix.lookup(M, keys)), 'KINF_ERR_REDIS')).toBe(true);
    expect(isKinferenceError(await rejection(ix.listPods(M)), 'KINF_ERR_REDIS')).toBe(true);
  });

  it('rejects with KINF_ERR_REDIS_TIMEOUT when the server accepts but never answers', async () => {
    const sockets: Socket[] = [];
    const blackHole: Server = createServer((s) => {
      sockets.push(s);
      s.on('error', () => {});
    });
    const port = await freePort();
    await new Promise<void>((r) => blackHole.listen(port, '127.0.0.1', r));
    try {
      const ix = index({ url: `redis://127.0.0.1:${port}/0`, lookupTimeoutMs: 30 });
      expect(isKinferenceError(await rejection(ix.lookup(M, keys)), 'KINF_ERR_REDIS_TIMEOUT')).toBe(true);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => blackHole.close(() => r()));
    }
  });

  it('rejects every call after close()', async () => {
    const ix = index();
    await ix.lookup(M, keys);
    await ix.close();
    expect(isKinferenceError(await rejection(ix.lookup(M, keys)), 'KINF_ERR_REDIS')).toBe(true);
  });
});
