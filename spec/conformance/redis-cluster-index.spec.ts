import { afterAll, beforeAll } from 'vitest';
import { createKvIndex } from '../../src/index/index.js';
import { startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js';
import { describeKvIndexConformance } from './kv-index.js';

let cluster: TestCluster;
let seedUrl: string;
let n = 0;
beforeAll(async () => {
  cluster = await startRedisCluster(3);
  // Seeded from a node that does not hold the suite's model: every call must follow the slot map.
  seedUrl = await cluster.urlAvoiding('Qwen/Qwen3-8B');
}, 30_000);
afterAll(async () => {
  await cluster?.stop();
});

// Three real cluster-enabled redis-servers; each test gets its own key prefix (the slot is the model's).
describeKvIndexConformance('RedisKvIndex on a 3-shard Redis Cluster', () =>
  createKvIndex({
    kind: 'redis',
    url: seedUrl,
    cluster: true,
    keyPrefix: `conf${++n}`,
    lookupTimeoutMs: 5000,
  }),
);
