import { Redis, type RedisOptions } from 'ioredis';
import { KinferenceError, isKinferenceError } from '../core/errors.js';

export interface RedisConnectionOptions {
  /** Caps the TCP connect + handshake of each (re)connection attempt. */
  connectTimeoutMs?: number;
  /** A connection with commands pending and no byte received for this long is dead: drop and reconnect. */
  socketTimeoutMs?: number;
}

/** Reconnect backoff: 50 ms doubling to 2 s, forever (the index must come back without a restart). */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(Math.max(attempt - 1, 0), 6), 2000);
}

/**
 * ioredis options that make every command fail fast instead of waiting on a dead Redis:
 * - enableOfflineQueue false: a command issued while disconnected is rejected at once, never queued;
 * - maxRetriesPerRequest 0 + autoResendUnfulfilledCommands false: commands in flight when the connection
 *   drops are rejected, never replayed (a replayed apply would count a refcount twice);
 * - lazyConnect: no socket until first use (the plugin must open nothing at module load);
 * - socketTimeout: a black-holed connection (no RST, no reply) is torn down, not waited on forever.
 */
export function failFastOptions(o: RedisConnectionOptions = {}): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    connectTimeout: o.connectTimeoutMs ?? 2000,
    socketTimeout: o.socketTimeoutMs ?? 5000,
    retryStrategy: reconnectDelayMs,
    disableClientInfo: true,
  };
}

/**
 * One ioredis client plus the readiness rule of the index: before the first connection is up, callers
 * wait for it (within their own budget); once a connection has failed, callers are rejected at once
 * with KINF_ERR_REDIS until ioredis has reconnected in the background.
 */
export class RedisConnection {
  readonly client: Redis;
  #down = false;
  #lastError: Error | null = null;
  #waiters: { resolve(): void; reject(e: Error): void }[] = [];
  #closed = false;

  constructor(url: string, options: RedisConnectionOptions = {}) {
    this.client = new Redis(url, failFastOptions(options));
    this.client.on('error', (e: Error) => {
      this.#lastError = e;
    });
    this.client.on('ready', () => {
      this.#down = false;
      this.#settle(null);
    });
    this.client.on('close', () => {
      this.#down = true;
      this.#settle(this.#unavailable());
    });
  }

  /** Resolves when commands can be sent; rejects with KINF_ERR_REDIS when Redis is known to be down. */
  async ready(): Promise<void> {
    const c = this.client;
    if (c.status === 'ready') return;
    if (this.#closed || c.status === 'end')
      throw new KinferenceError('KINF_ERR_REDIS', 'the index connection is closed');
    if (this.#down) throw this.#unavailable();
    if (c.status === 'wait') c.connect().catch(() => {}); // first use; failures arrive as 'close'
    await new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#settle(new KinferenceError('KINF_ERR_REDIS', 'the index connection is closed'));
    if (this.client.status === 'ready') {
      try {
        await this.client.quit();
        return;
      } catch {
        // fall through: drop the socket
      }
    }
    this.client.disconnect();
  }

  #settle(err: Error | null): void {
    const ws = this.#waiters;
    this.#waiters = [];
    for (const w of ws)
      if (err) w.reject(err);
      else w.resolve();
  }

  #unavailable(): KinferenceError {
    const why = this.#lastError ? `: ${this.#lastError.message}` : '';
    return new KinferenceError('KINF_ERR_REDIS', `Redis is unavailable (${this.client.status})${why}`, {
      cause: this.#lastError ?? undefined,
    });
  }
}

/** Runs `work` with a deadline: past it the promise rejects with KINF_ERR_REDIS_TIMEOUT (work may finish later). */
export async function withDeadline<T>(work: () => Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const p = work();
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new KinferenceError(
            'KINF_ERR_REDIS_TIMEOUT',
            `${what}: no answer from Redis within ${timeoutMs} ms`,
          ),
        ),
      timeoutMs,
    );
    timer.unref();
  });
  p.catch(() => {}); // a late failure after the deadline is nobody's business
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Anything a Redis call throws, as a KinferenceError (KINF_ERR_REDIS unless it already has a code). */
export function asIndexError(e: unknown, what: string): KinferenceError {
  if (isKinferenceError(e)) return e;
  const msg = e instanceof Error ? e.message : String(e);
  return new KinferenceError('KINF_ERR_REDIS', `${what}: ${msg}`, { cause: e });
}
