import { afterAll, beforeAll } from 'vitest';
import { createKvIndex } from '../../src/index/index.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { describeKvIndexConformance } from './kv-index.js';

let redis: TestRedis;
let n = 0;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

// A real redis-server; each test gets its own key prefix, so no test sees another's keys.
describeKvIndexConformance('RedisKvIndex', () =>
  createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: `conf${++n}`, lookupTimeoutMs: 5000 }),
);
