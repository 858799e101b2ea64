// Starts a private redis-server on a free loopback port (demo, benchmarks, tests); free-port helpers.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { KinferenceError } from '../src/core/errors.js';

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
  /** SIGSTOP: the process answers nothing (and replicates nothing) until `resume()`. */
  pause(): void;
  /** SIGCONT after `pause()`. */
  resume(): void;
}

/** Binds `port` (0: the kernel picks) on loopback and releases it; null when it is taken. */
function tryPort(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(addr === null || typeof addr === 'string' ? null : addr.port));
    });
  });
}

/** The start of the kernel's range for outgoing connections' local ports (Linux; 32768 elsewhere). */
function ephemeralStart(): number {
  try {
    const lo = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(lo) && lo > 2048) return lo;
  } catch {
    // not Linux
  }
  return 32768;
}

/**
 * A free loopback port for a server that binds it later. Chosen at random below the ephemeral range: a port
 * the kernel hands out (port 0) can be taken by any process's outgoing connection before the server binds it.
 */
export async function freeLoopbackPort(): Promise<number> {
  const hi = ephemeralStart();
  const lo = Math.max(1024, hi - 12_000);
  for (let i = 0; i < 100; i++) {
    const port = await tryPort(lo + Math.floor(Math.random() * (hi - lo)));
    if (port !== null) return port;
  }
  const any = await tryPort(0);
  if (any === null) throw new Error('no free loopback port');
  return any;
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

async function launch(port: number, timeoutMs: number, extraArgs: readonly string[]): Promise<ChildProcess> {
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
      ...extraArgs,
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
    proc.kill('SIGCONT'); // a paused process acts on SIGTERM only once it runs again
  });
}

export async function startRedisServer(
  /** `extraArgs`: more redis-server options (e.g. `--cluster-enabled yes` for a Cluster node). */
  opts: { port?: number; timeoutMs?: number; extraArgs?: readonly string[] } = {},
): Promise<RedisServer> {
  const port = opts.port ?? (await freeLoopbackPort());
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const extraArgs = opts.extraArgs ?? [];
  let proc = await launch(port, timeoutMs, extraArgs);
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    stop: () => exit(proc, 'SIGTERM'),
    kill: () => exit(proc, 'SIGKILL'),
    async restart() {
      await exit(proc, 'SIGKILL');
      proc = await launch(port, timeoutMs, extraArgs);
    },
    pause: () => void proc.kill('SIGSTOP'),
    resume: () => void proc.kill('SIGCONT'),
  };
}
