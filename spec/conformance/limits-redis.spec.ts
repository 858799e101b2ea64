import { afterAll, beforeAll } from 'vitest';
import { RedisLimitStore } from '../../src/limits/index.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { describeLimitStoreConformance } from './limits.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describeLimitStoreConformance('RedisLimitStore', async () => {
  const store = new RedisLimitStore({ url: redis.url });
  return { store, close: () => store.close() };
});
