import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { KinferenceError } from '../core/errors.js';

/**
 * A private redis-server child process on a free loopback port: for the demo, benchmarks and tests (which
 * can kill it to test faults). Nothing is persisted.
 */
export interface RedisServer {
  port: number;
  url: string;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** SIGKILL and wait: a crash. */
  kill(): Promise<void>;
  /** Kill, then start again on the same port (empty). */
  restart(): Promise<void>;
}

export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') return reject(new Error('no port'));
      srv.close(() => resolve(addr.port));
    });
  });
}

/** True when a Redis answers PING at `target` (a URL, or a loopback port). */
export async function redisAnswers(target: string | number, connectTimeoutMs = 1000): Promise<boolean> {
  const opts = {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: connectTimeoutMs,
  };
  const c =
    typeof target === 'number'
      ? new Redis({ ...opts, port: target, host: '127.0.0.1' })
      : new Redis(target, opts);
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

async function launch(port: number, timeoutMs: number): Promise<ChildProcess> {
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
  let failure: Error | null = null;
  proc.on('error', (e) => (failure = e));
  proc.on('exit', (code) => (failure ??= new Error(`redis-server exited with code ${code}`)));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (failure) {
      const e = failure as NodeJS.ErrnoException;
      const hint = e.code === 'ENOENT' ? ' (is redis-server installed? apt-get install -y redis-server)' : '';
      throw new KinferenceError(
        'KINF_ERR_REDIS',
        `cannot start redis-server on port ${port}: ${e.message}${hint}`,
        { cause: e },
      );
    }
    if (await redisAnswers(port)) return proc;
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new KinferenceError(
        'KINF_ERR_REDIS',
        `redis-server on port ${port} not ready after ${timeoutMs} ms`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function exit(proc: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill(signal);
  });
}

export async function startRedisServer(
  opts: { port?: number; timeoutMs?: number } = {},
): Promise<RedisServer> {
  const port = opts.port ?? (await freeLoopbackPort());
  const timeoutMs = opts.timeoutMs ?? 10_000;
  let proc = await launch(port, timeoutMs);
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    stop: () => exit(proc, 'SIGTERM'),
    kill: () => exit(proc, 'SIGKILL'),
    async restart() {
      await exit(proc, 'SIGKILL');
      proc = await launch(port, timeoutMs);
    },
  };
}
