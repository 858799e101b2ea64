// RedisKvIndex: the KvIndex in Redis, its four roles on one shared connection, and its defaults.
import { KinferenceError } from '../core/errors.js';
import type { BlockKey, LookupResult, PodState } from '../core/types.js';
import type {
  ApplyId,
  HandoffTake,
  IndexLossReason,
  IndexOp,
  KvIndex,
  PodRef,
  SharedReservation,
} from './kv-index.js';
import type { PodStatePatch } from './pod-state-codec.js';
import type { RedisConnectionOptions } from './redis-connection.js';
import { RedisHandoffStore } from './redis-handoff.js';
import { RedisIndexContext } from './redis-index-context.js';
import { RedisIndexReader } from './redis-index-reader.js';
import { RedisIndexWriter } from './redis-index-writer.js';
import { DEFAULT_KEY_PREFIX, checkKeyPrefix } from './redis-keys.js';
import { RedisReservationStore } from './redis-reservations.js';

export interface RedisKvIndexOptions extends RedisConnectionOptions {
  /** redis://[user:password@]host:port/db or rediss:// (TLS). */
  url: string;
  /** First part of every key (default "kinf"); the collector and every plugin must agree on it. */
  keyPrefix?: string;
  /** Budget of one lookup, readiness and a NOSCRIPT reload included (default 25, the plugin's). */
  lookupTimeoutMs?: number;
  /** Budget of writes and listPods (default 2000). */
  commandTimeoutMs?: number;
  /** TTL of a block key, refreshed on every store; 0 = none (default 86400). A safety net only. */
  blockTtlSeconds?: number;
  /** Block keys per apply script call; bigger batches become several calls, in order (default 8192). */
  maxKeysPerCall?: number;
  /**
   * How often a writer checks that Redis still holds what it wrote (besides after every reconnection and
   * on every apply); 0 = only then (default 5000). Costs one HMGET per model; nothing until the first apply.
   */
  verifyIntervalMs?: number;
  /**
   * The writer fence (src/index/lua/fence.ts): `holderValue` is what this process's writer lease writes
   * in each model's lease key (formatLeaseHolder(holder)). Every write script then checks, atomically,
   * that the model's lease key holds it (or is absent), and otherwise changes nothing: the write rejects
   * with KINF_ERR_LEASE_LOST (a LeaseLostError). Without it (default) nothing is checked. `shard`
   * ('i/n', collector.shard_index/shard_count): the lease checked is that shard's own.
   */
  fence?: { holderValue: string; shard?: string };
}

export const REDIS_INDEX_DEFAULTS = {
  keyPrefix: DEFAULT_KEY_PREFIX,
  lookupTimeoutMs: 25,
  commandTimeoutMs: 2000,
  blockTtlSeconds: 86_400,
  maxKeysPerCall: 8192,
  verifyIntervalMs: 5000,
} as const;

/**
 * The KvIndex in Redis (layout in redis-keys.ts, scripts in lua/): one connection shared by the four roles
 * (redis-index-context.ts), each in its own file: the reader (redis-index-reader.ts), the writer and its
 * lost-write watch (redis-index-writer.ts, redis-write-loss.ts), shared reservations
 * (redis-reservations.ts) and handoffs (redis-handoff.ts). Every operation is one script call (apply: one
 * per maxKeysPerCall keys). Never hangs: lookups reject with KINF_ERR_REDIS_TIMEOUT past lookupTimeoutMs,
 * and with KINF_ERR_REDIS at once while Redis is down.
 *
 * Writes are exactly once (an ApplyId per apply, checked by the script) and their loss is detected: for
 * every pod it wrote, the index remembers the last apply record Redis confirmed, and checks that Redis
 * still holds it (or a later one) on every apply, after every reconnection and every verifyIntervalMs.
 * If not (Redis restarted empty or from an older snapshot, or was flushed), it tells the pod's
 * onWritesLost listeners, which rebuild the pod. Pods it removed are checked too, and removed again if a
 * snapshot brings them back.
 *
 * With `fence` (the collector's), every write is fenced by the writer lease (src/index/lua/fence.ts): a
 * process whose lease another holds cannot write, even before its renewal notices; KINF_ERR_LEASE_LOST.
 */
export class RedisKvIndex implements KvIndex {
  readonly #ctx: RedisIndexContext;
  readonly #reader: RedisIndexReader;
  readonly #writer: RedisIndexWriter;
  readonly #reservations: RedisReservationStore;
  readonly #handoff: RedisHandoffStore;

  constructor(opts: RedisKvIndexOptions) {
    const o = { ...REDIS_INDEX_DEFAULTS, ...definedOnly(opts) };
    checkKeyPrefix(o.keyPrefix);
    for (const [name, v, min] of [
      ['lookupTimeoutMs', o.lookupTimeoutMs, 1],
      ['commandTimeoutMs', o.commandTimeoutMs, 1],
      ['blockTtlSeconds', o.blockTtlSeconds, 0],
      ['maxKeysPerCall', o.maxKeysPerCall, 1],
      ['verifyIntervalMs', o.verifyIntervalMs, 0],
    ] as const) {
      if (!Number.isInteger(v) || v < min)
        throw new KinferenceError('KINF_ERR_CONFIG', `${name} must be an integer >= ${min}, got ${v}`);
    }
    if (opts.fence !== undefined && (typeof opts.fence.holderValue !== 'string' || !opts.fence.holderValue))
      throw new KinferenceError('KINF_ERR_CONFIG', 'fence.holderValue must be a non-empty string');
    this.#ctx = new RedisIndexContext(opts.url, opts, {
      keyPrefix: o.keyPrefix,
      lookupTimeoutMs: o.lookupTimeoutMs,
      commandTimeoutMs: o.commandTimeoutMs,
      blockTtlSeconds: o.blockTtlSeconds,
      maxKeysPerCall: o.maxKeysPerCall,
      verifyIntervalMs: o.verifyIntervalMs,
      log: opts.log ?? null,
      fence: opts.fence ? { holderValue: opts.fence.holderValue, shard: opts.fence.shard ?? '' } : null,
    });
    this.#reader = new RedisIndexReader(this.#ctx);
    this.#writer = new RedisIndexWriter(this.#ctx);
    this.#reservations = new RedisReservationStore(this.#ctx);
    const watch = this.#writer.watch;
    this.#handoff = new RedisHandoffStore(this.#ctx, (base, podId) => watch.confirmed(base, podId));
    this.#ctx.conn.onReady((reconnected) => {
      // A reconnection may be to a Redis that restarted (empty, or from a snapshot): check at once.
      if (reconnected) void this.verify();
    });
  }

  // ---- IndexReader (redis-index-reader.ts) ------------------------------------------------------------

  lookup(model: string, keys: readonly BlockKey[]): Promise<LookupResult> {
    return this.#reader.lookup(model, keys);
  }

  listPods(model: string): Promise<PodState[]> {
    return this.#reader.listPods(model);
  }

  // ---- IndexWriter (redis-index-writer.ts) ------------------------------------------------------------

  apply(pod: PodRef, ops: readonly IndexOp[], id?: ApplyId): Promise<void> {
    return this.#writer.apply(pod, ops, id);
  }

  upsertPodState(pod: PodRef, state: PodStatePatch): Promise<void> {
    return this.#writer.upsertPodState(pod, state);
  }

  removePod(pod: PodRef): Promise<void> {
    return this.#writer.removePod(pod);
  }

  onWritesLost(pod: PodRef, listener: (reason: IndexLossReason) => void): () => void {
    return this.#writer.onWritesLost(pod, listener);
  }

  /**
   * Checks that Redis still holds the last write confirmed for every pod this index wrote, and that the
   * pods it removed are still gone (runs by itself after a reconnection and every verifyIntervalMs).
   * Resolves when done; a Redis that is down or slow is skipped silently (the next run tries again).
   */
  verify(): Promise<void> {
    return this.#writer.watch.verify();
  }

  // ---- ReservationStore (redis-reservations.ts) -------------------------------------------------------

  shareReservation(model: string, r: SharedReservation, ttlMs: number): Promise<void> {
    return this.#reservations.shareReservation(model, r, ttlMs);
  }

  endReservation(model: string, r: SharedReservation): Promise<void> {
    return this.#reservations.endReservation(model, r);
  }

  sharedReservations(
    model: string,
    sinceMs: number,
    limit: number,
    exceptRouter?: string,
  ): Promise<SharedReservation[]> {
    return this.#reservations.sharedReservations(model, sinceMs, limit, exceptRouter);
  }

  // ---- HandoffStore (redis-handoff.ts) ----------------------------------------------------------------

  saveHandoff(pod: PodRef, record: string): Promise<boolean> {
    return this.#handoff.saveHandoff(pod, record);
  }

  takeHandoff(pod: PodRef): Promise<HandoffTake> {
    return this.#handoff.takeHandoff(pod);
  }

  // -----------------------------------------------------------------------------------------------------

  /** Key base of a model, e.g. "kinf:{Ab3_x9Qz}:" (exposed for tests and tools that inspect keys). */
  keyBase(model: string): string {
    return this.#ctx.base(model);
  }

  async close(): Promise<void> {
    this.#writer.watch.close();
    await this.#ctx.conn.close();
  }
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
