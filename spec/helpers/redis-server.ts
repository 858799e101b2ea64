// startRedis: a private redis-server with a client for specs (which may kill it to test faults).
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from '../../harness/redis-server.js';

/** A private redis-server on a free port with a client: tests can kill it to test faults. Always `stop()` it. */
export interface TestRedis extends RedisServer {
  client: Redis;
}

export async function startRedis(): Promise<TestRedis> {
  const server = await startRedisServer();
  const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  return {
    port: server.port,
    url: server.url,
    client,
    async stop() {
      client.disconnect();
      await server.stop();
    },
    kill: () => server.kill(),
    restart: () => server.restart(),
    pause: () => server.pause(),
    resume: () => server.resume(),
  };
}
