import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/util/redis-server.js';

/** A private redis-server on a free port with a client: tests can kill it to test faults. Always `stop()` it. */
export interface TestRedis {
  port: number;
  url: string;
  client: Redis;
  stop(): Promise<void>;
  /** Kills the server (SIGKILL) without cleanup, to simulate a crash; `restart()` brings it back. */
  kill(): Promise<void>;
  restart(): Promise<void>;
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
  };
}
