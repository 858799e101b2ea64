import { describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import type { BlockKey } from '../../../src/core/types.js';
import { RedisKvIndex, type ApplyId, type IndexOp, type PodRef } from '../../../src/index/index.js';
import { packEntry } from '../../../src/index/lua/entry.js';
import { SCRIPTS } from '../../../src/index/redis-scripts.js';
import { appliedKey, blockRedisKey } from '../../../src/index/redis-keys.js';
import { applyCalls } from '../../../src/index/script-args.js';
import { chain } from '../../conformance/chains.js';
import { waitFor } from '../../helpers/ports.js';
import { useRedisIndexes } from '../../helpers/redis-indexes.js';

const fx = useRedisIndexes('once');
const index = fx.index.bind(fx);

/**
 * A write whose answer is lost (timeout, dropped connection) may have run. The collector retries it under
 * the same ApplyId; Redis must run each apply, and each part of a split apply, exactly once.
 */
const M = 'Qwen/Qwen3-8B';
const A: PodRef = { model: M, podId: 'pod-a' };
const keys = chain('exactly once', 12);

async function gpu(ix: RedisKvIndex, k: readonly BlockKey[] = keys): Promise<number> {
  return (await ix.lookup(M, k)).pods.find((p) => p.state.podId === A.podId)?.prefixBlocks.GPU ?? -1;
}

/**
 * Connects `ix` (its first write waits for it). A call on a fresh index waits for the connection within its own
 * deadline (by design: the caller's budget bounds it all), and these tests give writes tens of ms, to time
 * them out against a stalled Redis; a connect on a loaded machine can use that up alone. So retry until a
 * write fits: the stall is what the tests time out, not the connect.
 */
async function connected(ix: RedisKvIndex): Promise<void> {
  await waitFor('the index connected', async () => {
    await ix.upsertPodState(A, {});
    return true;
  });
}

function rawBlock(ix: RedisKvIndex, key: BlockKey): Buffer {
  return blockRedisKey(ix.keyBase(M), Buffer.from(key, 'hex'));
}

describe('RedisKvIndex: a retried apply counts once', () => {
  it('a write that timed out while Redis was stalled, then retried, is counted once', async () => {
    const ix = index({ commandTimeoutMs: 100 });
    await connected(ix);
    await ix.lookup(M, keys); // the lookup script loaded
    const id: ApplyId = { writer: 'test-w', seq: 1 };
    const store: IndexOp[] = [{ op: 'store', keys: keys.slice(0, 3), tier: 'GPU' }];
    await fx.redis.client.client('PAUSE', 500, 'ALL');
    const e = await ix.apply(A, store, id).then(
      () => null,
      (err: unknown) => err,
    );
    expect(isKinferenceError(e, 'KINF_ERR_REDIS_TIMEOUT')).toBe(true);
    // The retry waits behind the first copy; Redis then runs both, and the second does nothing.
    await waitFor('Redis unpaused', async () => {
      await ix.apply(A, store, id);
      return true;
    });
    expect(await gpu(ix)).toBe(3);
    const [idx] = ((await fx.redis.client.hget(`${ix.keyBase(M)}pods`, A.podId)) ?? '').split(':');
    expect(await fx.redis.client.get(rawBlock(ix, keys[0]!))).toBe(`${idx}=${packEntry([1, 0, 0], 0)}`);
    await ix.apply(A, [{ op: 'remove', keys: keys.slice(0, 3), tier: 'GPU' }], { writer: 'test-w', seq: 2 });
    expect(await gpu(ix)).toBe(0);
    expect(await fx.redis.client.exists(rawBlock(ix, keys[0]!))).toBe(0);
  });

  it('an apply split into calls that failed part-way: the retry runs only the parts that did not run', async () => {
    const ix = index({ maxKeysPerCall: 4 });
    await ix.upsertPodState(A, {});
    const id: ApplyId = { writer: 'test-w', seq: 7 };
    const store: IndexOp[] = [{ op: 'store', keys: keys.slice(0, 10), tier: 'GPU' }];
    const calls = applyCalls(ix.keyBase(M), A.podId, 86_400, store, 4, id, null);
    expect(calls).toHaveLength(3);
    await SCRIPTS.apply.run(fx.redis.client, calls[0]!); // part 1 ran, then the connection dropped
    expect(await gpu(ix)).toBe(4);
    await ix.apply(A, store, id); // the retry: parts 1-3
    expect(await gpu(ix)).toBe(10);
    expect(await fx.redis.client.hget(appliedKey(ix.keyBase(M)), A.podId)).toBe('test-w:7:3');
    await ix.apply(A, store, id); // once more: all three skipped
    await ix.apply(A, [{ op: 'remove', keys: keys.slice(0, 10), tier: 'GPU' }], { writer: 'test-w', seq: 8 });
    expect(await gpu(ix)).toBe(0);
  });

  it('sends no further part once the caller has given up on the apply', async () => {
    const ix = index({ maxKeysPerCall: 1, commandTimeoutMs: 30 });
    await connected(ix);
    await ix.lookup(M, keys);
    const id: ApplyId = { writer: 'test-w', seq: 3 };
    await fx.redis.client.client('PAUSE', 300, 'ALL');
    const e = await ix.apply(A, [{ op: 'store', keys: keys.slice(0, 5), tier: 'GPU' }], id).then(
      () => null,
      (err: unknown) => err,
    );
    expect(isKinferenceError(e, 'KINF_ERR_REDIS_TIMEOUT')).toBe(true);
    await waitFor('Redis unpaused', async () => (await ix.lookup(M, keys)).pods.length === 1);
    await new Promise((r) => setTimeout(r, 50));
    expect(await fx.redis.client.hget(appliedKey(ix.keyBase(M)), A.podId)).toBe('test-w:3:1');
    expect(await gpu(ix)).toBe(1);
  });
});
