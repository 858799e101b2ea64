import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort, waitFor } from './ports.js';

/** A private redis-server on a free port: tests can kill it to test faults. Always `stop()` it. */
export interface TestRedis {
  port: number;
  url: string;
  client: Redis;
  stop(): Promise<void>;
  /** Kills the server (SIGKILL) without cleanup, to simulate a crash; `restart()` brings it back. */
  kill(): Promise<void>;
  restart(): Promise<void>;
}

async function launch(port: number): Promise<ChildProcess> {
  const proc = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--loglevel',
      'warning',
    ],
    { stdio: 'ignore' },
  );
  let failed: Error | null = null;
  proc.on('error', (e) => (failed = e));
  await waitFor(`redis-server on ${port}`, async () => {
    if (failed) throw failed;
    const c = new Redis({
      port,
      host: '127.0.0.1',
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    c.on('error', () => {});
    try {
      await c.connect();
      return (await c.ping()) === 'PONG';
    } finally {
      c.disconnect();
    }
  });
  return proc;
}

async function exit(proc: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill(signal);
  });
}

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  let proc = await launch(port);
  const url = `redis://127.0.0.1:${port}/0`;
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  return {
    port,
    url,
    client,
    async stop() {
      client.disconnect();
      await exit(proc, 'SIGTERM');
    },
    async kill() {
      await exit(proc, 'SIGKILL');
    },
    async restart() {
      await exit(proc, 'SIGKILL');
      proc = await launch(port);
    },
  };
}
