// A private Redis Cluster for specs that knows where a model's keys live; Redis or Cluster by flag.
import { modelKeyBase } from '../../src/index/index.js';
import {
  startRedisCluster as startProcesses,
  type RedisClusterProcesses,
} from '../../harness/redis-cluster.js';
import { startRedis } from './redis-server.js';

export { startClusterNode, type ClusterNode } from '../../harness/redis-cluster.js';

/** A private Redis Cluster (harness/redis-cluster.ts) that also knows where a model's index keys live. */
export interface TestCluster extends RedisClusterProcesses {
  /** The slot of `model`'s index keys (the hash tag of redis-keys.ts; the key prefix does not matter). */
  slotOfModel(model: string): Promise<number>;
  /** The URL of a node that does not serve `model`: a client seeded there must follow the slot map. */
  urlAvoiding(model: string): Promise<string>;
}

export async function startRedisCluster(size = 3): Promise<TestCluster> {
  const c = await startProcesses(size);
  // Every key of the model carries the base's hash tag, so the base's slot is theirs.
  const slotOfModel = (model: string): Promise<number> => c.slotOf(modelKeyBase('kinf', model));
  return Object.assign(c, {
    slotOfModel,
    async urlAvoiding(model: string) {
      const owner = await c.ownerOf(await slotOfModel(model));
      return c.nodes.find((_, i) => i !== owner)!.url;
    },
  });
}

/** Where a test keeps an index: a private redis-server, or a private 3-shard Redis Cluster. */
export interface IndexRedis {
  url: string;
  cluster: boolean;
  stop(): Promise<void>;
}

/**
 * A redis-server, or (`cluster`) a 3-shard Cluster whose `url` is a node that does not hold `model`'s slot,
 * so that every call for the model must follow the slot map.
 */
export async function startIndexRedis(cluster: boolean, model: string): Promise<IndexRedis> {
  if (!cluster) {
    const r = await startRedis();
    return { url: r.url, cluster, stop: () => r.stop() };
  }
  const c = await startRedisCluster(3);
  return { url: await c.urlAvoiding(model), cluster, stop: c.stop };
}
