// useRedisIndexes: one redis-server per suite and fresh indexes per test, for the index specs.
import { afterAll, afterEach, beforeAll } from 'vitest';
import { RedisKvIndex, type RedisKvIndexOptions } from '../../src/index/index.js';
import { startRedis, type TestRedis } from './redis-server.js';

export interface RedisIndexes {
  /** The suite's own redis-server (started before the first test). */
  readonly redis: TestRedis;
  /** A RedisKvIndex under a fresh key prefix, closed after the test. */
  index(opts?: Partial<RedisKvIndexOptions>): RedisKvIndex;
}

/** One redis-server per suite and fresh, self-closing indexes per test: the lifecycle the index specs share. */
export function useRedisIndexes(prefix: string, defaults: Partial<RedisKvIndexOptions> = {}): RedisIndexes {
  let redis: TestRedis | undefined;
  let n = 0;
  const open: RedisKvIndex[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((ix) => ix.close()));
  });
  afterAll(async () => {
    await redis?.stop();
  });
  return {
    get redis(): TestRedis {
      if (!redis) throw new Error('redis-server is not started yet (use it inside a test or hook)');
      return redis;
    },
    index(opts = {}) {
      const ix = new RedisKvIndex({
        url: this.redis.url,
        keyPrefix: `${prefix}${++n}`,
        lookupTimeoutMs: 5000,
        ...defaults,
        ...opts,
      });
      open.push(ix);
      return ix;
    },
  };
}

/** What `p` rejects with; fails the test if it resolves (index errors are checked field by field). */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}
