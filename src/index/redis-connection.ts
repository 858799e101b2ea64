// The index's Redis connection (ioredis: standalone, Sentinel or Cluster): TLS, backoff, deadlines, logs.
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { KinferenceError, isKinferenceError } from '../core/errors.js';

/** Where the index reports connection changes and lost writes (the collector's logger fits). */
export interface IndexLog {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export interface RedisConnectionOptions {
  /** Caps the TCP connect + handshake of each (re)connection attempt. */
  connectTimeoutMs?: number;
  /** A connection with commands pending and no byte received for this long is dead: drop and reconnect. */
  socketTimeoutMs?: number;
  /**
   * `redis_url` names one node of a Redis Cluster (any: the others are found from it). The client then
   * follows the cluster's slot map; each model's keys live in one slot (redis-keys.ts).
   */
  cluster?: boolean;
  /**
   * With `cluster`: more nodes to start from (host:port) when the URL's node does not answer; the client
   * asks them all, in a random order (ioredis), until one gives it the slot map. Credentials and TLS come
   * from the URL.
   */
  clusterNodes?: readonly string[];
  /** With a rediss:// URL: what the server and this client prove to each other (redisTlsOptions). */
  tls?: RedisTlsSettings;
  /**
   * Redis Sentinel: the primary is the one these sentinels name, followed across failovers. The URL then
   * gives only the data nodes' user, password, database and TLS (its host and port are not used).
   */
  sentinel?: RedisSentinelSettings;
  /**
   * Gets one line per transition: connected, lost (with the error), restored (with the outage's length),
   * never one per reconnection attempt. Default: silent (the plugin).
   */
  log?: IndexLog;
}

/**
 * TLS to Redis beyond what a rediss:// URL says, as operators mount them: files (PEM) and a server name.
 * Named in errors by their config options (redis_tls_ca_file, …).
 */
export interface RedisTlsSettings {
  /** CA certificates that sign the server's certificate, trusted in place of the system CAs. */
  caFile?: string;
  /** Client certificate and its key, for a Redis with `tls-auth-clients yes`. */
  certFile?: string;
  keyFile?: string;
  /** The name the server certificate must carry (SNI and hostname check), when not the URL's host. */
  servername?: string;
}

/** Where Sentinel finds the primary (redis_sentinels, redis_sentinel_master, redis_sentinel_*). */
export interface RedisSentinelSettings {
  /** Sentinels to ask, host:port; ioredis adds the others they know of. */
  nodes: readonly string[];
  /** The name the sentinels monitor the primary under (`sentinel monitor <name> …`). */
  master: string;
  /** The sentinels' own password (their `requirepass`), when they have one. */
  password?: string;
  /** The sentinels speak TLS (with the TLS settings of the data nodes); default: as the URL does. */
  tls?: boolean;
}

function readPem(option: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new KinferenceError('KINF_ERR_CONFIG', `${option}: cannot read ${path} (${(e as Error).message})`, {
      cause: e,
    });
  }
}

/**
 * Node's TLS options for the connection, or undefined for plain TCP. The files are read here, once per
 * connection object (ioredis keeps them for every reconnection); an unreadable one, TLS settings on a
 * redis:// URL, or a certificate without its key is KINF_ERR_CONFIG naming the option. The server's
 * certificate is always verified.
 */
export function redisTlsOptions(url: string, t: RedisTlsSettings = {}): ConnectionOptions | undefined {
  const set = Object.values(t).some((v) => v !== undefined);
  if (!url.startsWith('rediss://')) {
    if (set)
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        'redis_tls_* options are set, but redis_url is not rediss:// (plain TCP): use rediss:// for TLS',
      );
    return undefined;
  }
  if ((t.certFile === undefined) !== (t.keyFile === undefined))
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      'redis_tls_cert_file and redis_tls_key_file go together: a client certificate needs its key',
    );
  return {
    ...(t.caFile !== undefined ? { ca: readPem('redis_tls_ca_file', t.caFile) } : {}),
    ...(t.certFile !== undefined ? { cert: readPem('redis_tls_cert_file', t.certFile) } : {}),
    ...(t.keyFile !== undefined ? { key: readPem('redis_tls_key_file', t.keyFile) } : {}),
    ...(t.servername !== undefined ? { servername: t.servername } : {}),
  };
}

/** Reconnect backoff: 50 ms doubling to 2 s, forever (the index must come back without a restart). */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(Math.max(attempt - 1, 0), 6), 2000);
}

/** Reconnect backoff through Sentinel: 50 ms doubling to 500 ms, forever. */
export function sentinelReconnectDelayMs(attempt: number): number {
  return Math.min(reconnectDelayMs(attempt), 500);
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
 * The same fail-fast rules for a Cluster client: no offline queue, nothing in flight resent after a
 * connection closes or the cluster is down (retryDelayOnFailover / OnClusterDown 0). A MOVED or ASK reply
 * is followed (the command did not run where it was sent), and TRYAGAIN during a slot migration is retried
 * after 50 ms; the caller's deadline bounds all of it.
 */
export function clusterOptions(
  url: string,
  o: RedisConnectionOptions = {},
  tls: ConnectionOptions | undefined = redisTlsOptions(url, o.tls),
): ClusterOptions {
  const u = new URL(url);
  const db = u.pathname.replace(/^\//, '');
  if (db !== '' && db !== '0')
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `redis_url selects database ${db}, but a Redis Cluster has only database 0 (use a key prefix instead)`,
    );
  const node = failFastOptions(o);
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 0,
    retryDelayOnTryAgain: 50,
    maxRedirections: 16,
    slotsRefreshTimeout: node.connectTimeout!,
    clusterRetryStrategy: (times: number) => reconnectDelayMs(times),
    redisOptions: {
      connectTimeout: node.connectTimeout!,
      socketTimeout: node.socketTimeout!,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      disableClientInfo: true,
      ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
      ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
      ...(tls !== undefined ? { tls } : {}),
    },
  };
}

/**
 * The nodes a Cluster client starts from, as ioredis takes them: the URL's, then `extra` (host:port). A
 * malformed extra node is a configuration error, not a node to skip.
 */
export function clusterSeeds(url: string, extra: readonly string[] = []): { host: string; port: number }[] {
  const u = new URL(url);
  const seeds = [{ host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port ? Number(u.port) : 6379 }];
  return [...seeds, ...hostPorts('redis_cluster_nodes', extra)];
}

/** host:port strings as ioredis takes them; a malformed one is a configuration error naming `option`. */
export function hostPorts(option: string, list: readonly string[]): { host: string; port: number }[] {
  return list.map((n) => {
    const m = /^([^:\s]+):([0-9]{1,5})$/.exec(n);
    const port = m ? Number(m[2]) : NaN;
    if (!m || port < 1 || port > 65535)
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `${option}: "${n}" is not host:port with a port from 1 to 65535`,
      );
    return { host: m[1]!, port };
  });
}

/**
 * ioredis options for a primary found through Sentinel, on top of the fail-fast ones: the URL (parsed by
 * ioredis) gives the data nodes' user, password and database. The sentinels are asked again on every
 * reconnection (every 50 ms doubling to 500 ms while down). A server that answers but is not a primary (a
 * stale answer) is refused by ioredis's role check, and the sentinels are asked again.
 */
export function sentinelOptions(
  s: RedisSentinelSettings,
  o: RedisConnectionOptions = {},
  tls: ConnectionOptions | undefined = undefined,
): RedisOptions {
  if (s.nodes.length === 0)
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      'redis_sentinels: at least one sentinel (host:port) is needed',
    );
  if (!/^[^\s]+$/.test(s.master))
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `redis_sentinel_master: "${s.master}" is not a master name (the name of \`sentinel monitor <name> …\`)`,
    );
  const base = failFastOptions(o);
  const sentinelTls = s.tls ?? tls !== undefined;
  return {
    ...base,
    sentinels: hostPorts('redis_sentinels', s.nodes),
    name: s.master,
    role: 'master',
    ...(s.password !== undefined ? { sentinelPassword: s.password } : {}),
    ...(tls !== undefined ? { tls, enableTLSForSentinelMode: true } : {}),
    ...(sentinelTls ? { sentinelTLS: tls ?? {} } : {}),
    // Reconnecting asks the sentinels first, which is cheap: retry more often than a lone server's backoff,
    // so the index comes back within half a second of a promotion.
    retryStrategy: sentinelReconnectDelayMs,
    sentinelRetryStrategy: sentinelReconnectDelayMs,
    sentinelCommandTimeout: base.connectTimeout!,
    // Not ioredis's failoverDetector: its sentinel subscribers have no error listener (ioredis prints every
    // failed reconnection to the console) and outlive quit(). A failover reaches the client anyway: the
    // killed primary's socket closes, and a demoted one's clients are killed by the sentinels.
    failoverDetector: false,
  };
}

/** Redis's answers to a SELECT of a database it does not have (out of range, or cluster mode). */
const SELECT_FAILED = /DB index is out of range|invalid DB index|SELECT is not allowed/i;
/** ioredis's error while no sentinel of the list answers (it retries by itself). */
const SENTINELS_UNREACHABLE = /^All sentinels are unreachable/;
/** A node's answer to CLUSTER SLOTS when it is a standalone Redis. */
const CLUSTER_DISABLED = /cluster support disabled/i;

/**
 * One ioredis client plus the readiness rule of the index: before the first connection is up, callers
 * wait for it (within their own budget); once a connection has failed, callers are rejected at once
 * with KINF_ERR_REDIS until ioredis has reconnected in the background.
 */
export class RedisConnection {
  readonly client: Redis | Cluster;
  #down = false;
  #lastError: Error | null = null;
  #waiters: { resolve(): void; reject(e: Error): void }[] = [];
  #readyListeners: ((reconnected: boolean) => void)[] = [];
  #closed = false;
  /**
   * Set when Redis refused the URL's database (nothing runs in db 0 instead), or `cluster` is set and the
   * server is not a Cluster node: every caller gets it.
   */
  #configError: KinferenceError | null = null;
  /** What was last logged: null before the first connection attempt settled. */
  #reported: 'up' | 'down' | null = null;
  #downSinceMs = 0;
  #everReady = false;
  readonly #log: IndexLog | null;
  readonly #where: string;

  constructor(url: string, options: RedisConnectionOptions = {}) {
    // ioredis would read anything else as a host name or a unix socket path and fail later, obscurely.
    if (!/^rediss?:\/\//.test(url))
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `Redis URL must start with redis:// or rediss://, got "${redactUrl(url)}"`,
      );
    // ioredis's own parse error (a TypeError) carries the whole URL, password included, in its `input`.
    if (!URL.canParse(url))
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `redis_url "${redactUrl(url)}" is not a URL: expected redis://[user:password@]host:port/db ` +
          '(port 1–65535; a password with / @ : or % percent-encoded)',
      );
    const extra = options.clusterNodes ?? [];
    if (!options.cluster && extra.length > 0)
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `redis_cluster_nodes is set (${extra.join(', ')}) but redis_cluster is not: set redis_cluster: true for a Redis Cluster, or drop redis_cluster_nodes`,
      );
    const sentinel = options.sentinel;
    if (options.cluster && sentinel)
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        'redis_sentinels and redis_cluster are both set: a Redis Cluster fails over by itself (drop redis_sentinels), or Sentinel watches a standalone primary (unset redis_cluster)',
      );
    const tls = redisTlsOptions(url, options.tls);
    this.client = options.cluster
      ? new Cluster(clusterSeeds(url, extra), clusterOptions(url, options, tls))
      : sentinel
        ? new Redis(url, sentinelOptions(sentinel, options, tls))
        : new Redis(url, { ...failFastOptions(options), ...(tls !== undefined ? { tls } : {}) });
    this.#log = options.log ?? null;
    this.#where = sentinel
      ? `sentinel master ${sentinel.master} via ${sentinel.nodes.join(',')} (${redactUrl(url)})`
      : redactUrl(url);
    this.client.on('error', (e: Error) => {
      this.#lastError = e;
      if (SELECT_FAILED.test(e.message)) this.#refuseDatabase(e);
      // ioredis goes on asking the sentinels without closing anything: without this, every call would wait
      // out its whole budget while no sentinel answers, and say "no answer" instead of why.
      else if (SENTINELS_UNREACHABLE.test(e.message)) {
        this.#down = true;
        this.#reportDown();
        this.#settle(this.#unavailable());
      }
    });
    if (this.client instanceof Cluster) this.#watchCluster(this.client);
    this.client.on('ready', () => {
      // ioredis goes on in db 0 when SELECT fails: reading another database's index would be silent and wrong.
      if (this.#configError) return this.#settle(this.#configError);
      this.#down = false;
      const reconnected = this.#everReady;
      this.#everReady = true;
      this.#reportUp();
      this.#settle(null);
      for (const f of this.#readyListeners) f(reconnected);
    });
    this.client.on('close', () => {
      this.#down = true;
      this.#reportDown();
      this.#settle(this.#unavailable());
    });
  }

  #watchCluster(cluster: Cluster): void {
    // The cluster-level error only says "Failed to refresh slots cache"; the node's own says why.
    cluster.on('node error', (e: Error) => {
      this.#lastError = e;
      if (!CLUSTER_DISABLED.test(e.message) || this.#configError) return;
      this.#configError = new KinferenceError(
        'KINF_ERR_CONFIG',
        `redis_cluster is set but redis_url is not a Redis Cluster node (${e.message}); unset redis_cluster`,
        { cause: e },
      );
      this.#log?.error('Redis is not a Cluster; the index is unavailable', { redis: this.#where, err: e });
      this.#settle(this.#configError);
    });
  }

  #refuseDatabase(e: Error): void {
    if (this.#configError) return;
    this.#configError = new KinferenceError(
      'KINF_ERR_CONFIG',
      `redis_url selects a database this Redis does not have (${e.message}); not using db 0 instead`,
      { cause: e },
    );
    this.#log?.error('Redis database cannot be selected; the index is unavailable', {
      redis: this.#where,
      err: e,
    });
  }

  /** Calls `listener` each time a connection becomes ready; `reconnected` is false the first time. */
  onReady(listener: (reconnected: boolean) => void): void {
    this.#readyListeners.push(listener);
  }

  #reportUp(): void {
    if (this.#reported === 'up') return;
    if (this.#reported === 'down')
      this.#log?.info('Redis connection restored', {
        redis: this.#where,
        downMs: Date.now() - this.#downSinceMs,
      });
    else this.#log?.info('Redis connected', { redis: this.#where });
    this.#reported = 'up';
  }

  #reportDown(): void {
    if (this.#closed || this.#reported === 'down') return;
    this.#log?.warn(
      this.#reported === 'up'
        ? 'Redis connection lost; reconnecting in the background'
        : 'Redis unreachable; retrying in the background',
      { redis: this.#where, err: this.#lastError ?? undefined },
    );
    this.#reported = 'down';
    this.#downSinceMs = Date.now();
  }

  /** Resolves when commands can be sent; rejects with KINF_ERR_REDIS when Redis is known to be down. */
  async ready(): Promise<void> {
    const c = this.client;
    if (this.#configError) throw this.#configError;
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

/**
 * Runs `work` with a deadline: past it the promise rejects with KINF_ERR_REDIS_TIMEOUT (work may finish
 * later; `expired()` tells it the caller has given up, so it sends nothing more).
 */
export async function withDeadline<T>(
  work: (expired: () => boolean) => Promise<T>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let late = false;
  const p = work(() => late);
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late = true;
      reject(
        new KinferenceError('KINF_ERR_REDIS_TIMEOUT', `${what}: no answer from Redis within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    timer.unref();
  });
  p.catch(() => {}); // a late failure after the deadline is nobody's business
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The URL without its user and password, for logs and errors. Up to the LAST @: a password may hold a raw @
 * or / (a URL parser ends the user info at the last @), and hiding a host is better than showing a password.
 */
export function redactUrl(url: string): string {
  return url.replace(/\/\/.*@/s, '//***@');
}

/** Anything a Redis call throws, as a KinferenceError (KINF_ERR_REDIS unless it already has a code). */
export function asIndexError(e: unknown, what: string): KinferenceError {
  if (isKinferenceError(e)) return e;
  const msg = e instanceof Error ? e.message : String(e);
  // Only a client that does not follow the slot map gets these: a Cluster client follows them itself.
  if (/^(MOVED|ASK) \d+ /.test(msg))
    return new KinferenceError(
      'KINF_ERR_CONFIG',
      `${what}: redis_url is a node of a Redis Cluster that does not serve this model's slot (${msg}); set redis_cluster: true`,
      { cause: e },
    );
  return new KinferenceError('KINF_ERR_REDIS', `${what}: ${msg}`, { cause: e });
}
