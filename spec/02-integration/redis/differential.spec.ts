import { afterAll, beforeAll, describe, it } from 'vitest';
import { MemoryKvIndex, RedisKvIndex } from '../../../src/index/index.js';
import { assertSameAsReference } from '../../conformance/differential.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe('RedisKvIndex against the MemoryKvIndex oracle', () => {
  it('answers every lookup of random store/remove/clear/upsert/removePod streams identically', async () => {
    let run = 0;
    await assertSameAsReference(
      () => new MemoryKvIndex(),
      // A fresh key prefix per run: an empty index without flushing the server. A small maxKeysPerCall
      // makes batches span several script calls, which must not change any answer.
      () =>
        new RedisKvIndex({
          url: redis.url,
          keyPrefix: `diff${++run}`,
          lookupTimeoutMs: 5000,
          maxKeysPerCall: 1 + (run % 3) * 16,
        }),
      { numRuns: 100 },
    );
  }, 120_000);
});
