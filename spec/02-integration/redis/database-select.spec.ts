import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisKvIndex, type PodRef } from '../../../src/index/index.js';
import { chain } from '../../conformance/chains.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

const M = 'Qwen/Qwen3-8B';
const A: PodRef = { model: M, podId: 'pod-a' };
const keys = chain('database select', 4);

let redis: TestRedis;

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

function withDb(db: number) {
  const logged: string[] = [];
  const ix = new RedisKvIndex({
    url: `${redis.url.replace(/\/\d*$/, '')}/${db}`,
    keyPrefix: 'dbsel',
    lookupTimeoutMs: 5000,
    log: {
      info: () => {},
      warn: () => {},
      error: (msg: string) => logged.push(msg),
    },
  });
  return { ix, logged };
}

describe('redis_url database', () => {
  it('refuses a database Redis does not have instead of reading db 0', async () => {
    // db 0 holds an index the wrong URL must not see
    const zero = withDb(0);
    await zero.ix.upsertPodState(A, {});
    await zero.ix.apply(A, [{ op: 'store', keys, tier: 'GPU' }]);
    expect((await zero.ix.lookup(M, keys)).pods).toHaveLength(1);

    const bad = withDb(99);
    await expect(bad.ix.lookup(M, keys)).rejects.toMatchObject({
      code: 'KINF_ERR_CONFIG',
      message: expect.stringMatching(/database this Redis does not have.*DB index is out of range/),
    });
    await expect(bad.ix.lookup(M, keys)).rejects.toMatchObject({ code: 'KINF_ERR_CONFIG' });
    expect(bad.logged).toEqual(['Redis database cannot be selected; the index is unavailable']);
    await Promise.all([zero.ix.close(), bad.ix.close()]);
  });

  it('uses the database the URL names when Redis has it', async () => {
    const one = withDb(1);
    expect((await one.ix.lookup(M, keys)).pods).toHaveLength(0);
    await one.ix.close();
  });
});
