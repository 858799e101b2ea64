// The writer lease: one collector process at a time writes a model's index, via a Redis key with a TTL.
import { hostname } from 'node:os';
import { KinferenceError } from '../core/errors.js';
import { processWriterId } from './apply-id.js';
import { LEASE_RELEASE_LUA, LEASE_REPLY, LEASE_TAKE_LUA } from './lua/lease.js';
import {
  RedisConnection,
  asIndexError,
  withDeadline,
  type RedisConnectionOptions,
} from './redis-connection.js';
import { DEFAULT_KEY_PREFIX, checkKeyPrefix, modelKeyBase, writerLeaseKey } from './redis-keys.js';
import { RedisScript } from './script.js';

/** Who holds a writer lease: a collector process (the value of the lease key, parsed). */
export interface LeaseHolder {
  /** The process's writer id (its apply ids carry the same one), or the raw value if it is not ours. */
  id: string;
  host: string | null;
  pid: number | null;
}

/** An owned model whose lease another holder has. */
export interface LeaseConflict {
  model: string;
  holder: LeaseHolder;
  /** Until the holder's lease expires unless renewed; null when unknown (no TTL on the key). */
  expiresInMs: number | null;
}

export type LeaseAcquireResult = { acquired: true } | { acquired: false; held: LeaseConflict[] };

export type LeaseRenewResult =
  /** Every lease is still ours; `retaken`: models whose key was gone (Redis restarted empty or was flushed) and was taken back. */
  | { kept: true; retaken: string[] }
  /** Another holder has taken at least one of them (ours had expired): this process must stop writing. */
  | { kept: false; lost: LeaseConflict[] };

/**
 * The right to write the index of a set of models: one lease per model, in Redis, held by one process at a
 * time (docs/collector.md, "One writer per model"). Blocks are reference-counted, so two collectors
 * following the same pods would count every event twice; the lease makes the second one wait.
 */
export interface WriterLease {
  readonly models: readonly string[];
  readonly ttlMs: number;
  /** This process, as written in the lease keys. */
  readonly holder: LeaseHolder;
  /**
   * All or nothing: takes every model's lease if each is free or already ours; else takes none (gives back
   * those it took in this attempt) and says who holds which. Rejects with KINF_ERR_REDIS(_TIMEOUT) when
   * Redis cannot be reached, KINF_ERR_CONFIG when the URL's database does not exist.
   */
  tryAcquire(): Promise<LeaseAcquireResult>;
  /** Extends every lease that is ours, takes back one whose key is gone, never touches another's. */
  renew(): Promise<LeaseRenewResult>;
  /** Deletes the leases that are still ours (a clean stop): a standby takes over at its next try. */
  release(): Promise<void>;
  /** Called after each reconnection to Redis (not the first connection): renew at once. */
  onReconnect(listener: () => void): void;
  close(): Promise<void>;
}

export interface RedisWriterLeaseOptions extends RedisConnectionOptions {
  url: string;
  keyPrefix?: string;
  models: readonly string[];
  ttlMs: number;
  /** Budget of one Redis call; default ttlMs/3, at most 2000. */
  commandTimeoutMs?: number;
  /** Default: this process (its writer id, host name and pid). Tests pass others to play two collectors. */
  holder?: LeaseHolder;
  /**
   * A collector shard's lease ('i/n', collector.shard_index/shard_count): key `<prefix>:{T}:writer:i/n`,
   * so each shard of a model's pods has its own writer. Default '': the model's one lease.
   */
  shard?: string;
}

export const MIN_LEASE_TTL_MS = 100;

export const LEASE_SCRIPTS = {
  take: new RedisScript('lease-take', LEASE_TAKE_LUA),
  release: new RedisScript('lease-release', LEASE_RELEASE_LUA),
} as const;

export function thisProcessHolder(): LeaseHolder {
  return { id: processWriterId(), host: hostname(), pid: process.pid };
}

export function formatLeaseHolder(h: LeaseHolder): string {
  return JSON.stringify({ id: h.id, host: h.host, pid: h.pid });
}

/** A lease key's value as a holder; a value this code did not write is shown as its id, as it is. */
export function parseLeaseHolder(value: string): LeaseHolder {
  try {
    const v = JSON.parse(value) as unknown;
    if (v !== null && typeof v === 'object' && typeof (v as { id?: unknown }).id === 'string') {
      const o = v as { id: string; host?: unknown; pid?: unknown };
      return {
        id: o.id,
        host: typeof o.host === 'string' ? o.host : null,
        pid: typeof o.pid === 'number' ? o.pid : null,
      };
    }
  } catch {
    // not JSON: fall through
  }
  return { id: value, host: null, pid: null };
}

/**
 * A write refused by the index's fence (src/index/lua/fence.ts): `holder`, not this process, holds the
 * writer lease of `model`. Nothing was written, and a retry would be refused too: the writer must stop
 * (the collector treats it as a lease lost at renewal). Code KINF_ERR_LEASE_LOST.
 */
export class LeaseLostError extends KinferenceError {
  readonly holder: LeaseHolder;

  constructor(
    readonly model: string,
    holderValue: string,
    what: string,
  ) {
    const holder = parseLeaseHolder(holderValue);
    super(
      'KINF_ERR_LEASE_LOST',
      `${what}: refused by the writer fence: the writer lease of ${model} is held by ` +
        `${describeLeaseHolder(holder)}, not by this process; nothing written`,
    );
    this.name = 'LeaseLostError';
    this.holder = holder;
  }
}

/** "id (host h, pid p)", for log messages. */
export function describeLeaseHolder(h: LeaseHolder): string {
  const where = [h.host !== null ? `host ${h.host}` : null, h.pid !== null ? `pid ${h.pid}` : null]
    .filter((x) => x !== null)
    .join(', ');
  return where ? `${h.id} (${where})` : h.id;
}

type TakeReply = { code: 'taken' | 'extended' } | { code: 'held'; holder: string; pttl: number };

function parseTakeReply(r: unknown): TakeReply {
  if (Array.isArray(r)) {
    if (r.length === 1 && r[0] === LEASE_REPLY.taken) return { code: 'taken' };
    if (r.length === 1 && r[0] === LEASE_REPLY.extended) return { code: 'extended' };
    if (r.length === 3 && r[0] === LEASE_REPLY.held && typeof r[1] === 'string' && typeof r[2] === 'number')
      return { code: 'held', holder: r[1], pttl: r[2] };
  }
  throw new KinferenceError('KINF_ERR_INDEX_REPLY', `lease-take: unexpected reply ${JSON.stringify(r)}`);
}

const conflict = (model: string, value: string, pttl: number): LeaseConflict => ({
  model,
  holder: parseLeaseHolder(value),
  expiresInMs: pttl >= 0 ? pttl : null,
});

/**
 * The writer lease in Redis: key `<prefix>:{T}:writer` per model (redis-keys.ts), value this process's
 * holder JSON, PX ttlMs. Its own connection, so a renewal never waits behind the index's big writes on the
 * client side, and fails fast like the index's (redis-connection.ts).
 */
export class RedisWriterLease implements WriterLease {
  readonly models: readonly string[];
  readonly ttlMs: number;
  readonly holder: LeaseHolder;
  readonly #value: string;
  readonly #keys: Map<string, string>;
  readonly #conn: RedisConnection;
  readonly #timeoutMs: number;
  readonly #reconnectListeners: (() => void)[] = [];

  constructor(opts: RedisWriterLeaseOptions) {
    const prefix = checkKeyPrefix(opts.keyPrefix ?? DEFAULT_KEY_PREFIX);
    if (!Number.isInteger(opts.ttlMs) || opts.ttlMs < MIN_LEASE_TTL_MS)
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `writer lease TTL must be an integer >= ${MIN_LEASE_TTL_MS} ms, got ${opts.ttlMs}`,
      );
    // One fixed order for every collector: two that want overlapping models take the first shared one in
    // the same order, so one of them gets all it wants instead of each holding a part (tryAcquire).
    this.models = [...new Set(opts.models)].sort();
    this.ttlMs = opts.ttlMs;
    this.holder = opts.holder ?? thisProcessHolder();
    this.#value = formatLeaseHolder(this.holder);
    this.#keys = new Map(
      this.models.map((m) => [m, writerLeaseKey(modelKeyBase(prefix, m), opts.shard ?? '')]),
    );
    this.#timeoutMs = opts.commandTimeoutMs ?? Math.min(2000, Math.floor(opts.ttlMs / 3));
    this.#conn = new RedisConnection(opts.url, opts);
    this.#conn.onReady((reconnected) => {
      if (reconnected) for (const f of this.#reconnectListeners) f();
    });
  }

  /** The lease key of an owned model (tests and tools inspect it). */
  key(model: string): string {
    const k = this.#keys.get(model);
    if (k === undefined) throw new KinferenceError('KINF_ERR_INTERNAL', `not an owned model: ${model}`);
    return k;
  }

  async tryAcquire(): Promise<LeaseAcquireResult> {
    return this.#run('writer lease acquire', this.#timeoutMs * (this.models.length + 1), async () => {
      const client = this.#conn.client;
      const taken: string[] = [];
      for (const [i, model] of this.models.entries()) {
        const r = await this.#take(model);
        if (r.code !== 'held') {
          taken.push(model);
          continue;
        }
        // Not all free: give back what this attempt took, and only look at the rest (taking them would
        // make another collector that wants them stand by for nothing).
        const held = [conflict(model, r.holder, r.pttl)];
        for (const m of this.models.slice(i + 1)) {
          const key = this.key(m);
          const [value, pttl] = await Promise.all([client.get(key), client.pttl(key)]);
          if (value !== null && value !== this.#value) held.push(conflict(m, value, pttl));
        }
        await Promise.all(taken.map((m) => this.#release(m)));
        return { acquired: false, held };
      }
      return { acquired: true };
    });
  }

  async renew(): Promise<LeaseRenewResult> {
    return this.#run('writer lease renew', this.#timeoutMs, async () => {
      const replies = await Promise.all(this.models.map(async (m) => [m, await this.#take(m)] as const));
      const lost = replies.flatMap(([m, r]) => (r.code === 'held' ? [conflict(m, r.holder, r.pttl)] : []));
      if (lost.length > 0) return { kept: false, lost };
      return { kept: true, retaken: replies.filter(([, r]) => r.code === 'taken').map(([m]) => m) };
    });
  }

  async release(): Promise<void> {
    await this.#run('writer lease release', this.#timeoutMs, async () => {
      await Promise.all(this.models.map((m) => this.#release(m)));
    });
  }

  onReconnect(listener: () => void): void {
    this.#reconnectListeners.push(listener);
  }

  async close(): Promise<void> {
    await this.#conn.close();
  }

  async #take(model: string): Promise<TakeReply> {
    return parseTakeReply(
      await LEASE_SCRIPTS.take.run(this.#conn.client, {
        keys: [this.key(model)],
        args: [this.#value, String(this.ttlMs)],
      }),
    );
  }

  async #release(model: string): Promise<void> {
    await LEASE_SCRIPTS.release.run(this.#conn.client, { keys: [this.key(model)], args: [this.#value] });
  }

  async #run<T>(what: string, timeoutMs: number, work: () => Promise<T>): Promise<T> {
    try {
      return await withDeadline(
        async () => {
          await this.#conn.ready();
          return work();
        },
        timeoutMs,
        what,
      );
    } catch (e) {
      throw asIndexError(e, what);
    }
  }
}
