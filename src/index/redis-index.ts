import { KinferenceError } from '../core/errors.js';
import type { BlockKey, LookupResult, PodState } from '../core/types.js';
import type { IndexOp, KvIndex, PodRef } from './kv-index.js';
import { APPLY_LUA } from './lua/apply.js';
import { LOOKUP_LUA } from './lua/lookup.js';
import { REMOVE_POD_LUA, UPSERT_POD_LUA } from './lua/pods.js';
import { parseLookupReply } from './lookup-reply.js';
import type { PodStatePatch } from './pod-state-codec.js';
import {
  RedisConnection,
  asIndexError,
  withDeadline,
  type RedisConnectionOptions,
} from './redis-connection.js';
import { DEFAULT_KEY_PREFIX, isValidKeyPrefix, modelKeyBase } from './redis-keys.js';
import { RedisScript, type ScriptCall } from './script.js';
import { applyCalls, lookupCall, removePodCall, upsertPodCall } from './script-args.js';

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
}

export const REDIS_INDEX_DEFAULTS = {
  keyPrefix: DEFAULT_KEY_PREFIX,
  lookupTimeoutMs: 25,
  commandTimeoutMs: 2000,
  blockTtlSeconds: 86_400,
  maxKeysPerCall: 8192,
} as const;

export const SCRIPTS = {
  lookup: new RedisScript('lookup', LOOKUP_LUA),
  apply: new RedisScript('apply', APPLY_LUA),
  upsertPod: new RedisScript('upsert-pod', UPSERT_POD_LUA),
  removePod: new RedisScript('remove-pod', REMOVE_POD_LUA),
} as const;

const MAX_CACHED_MODELS = 4096;

/**
 * The KvIndex in Redis (layout in redis-keys.ts, scripts in lua/). Every operation is one script call
 * (apply: one per maxKeysPerCall keys). Never hangs: lookups reject with KINF_ERR_REDIS_TIMEOUT past
 * lookupTimeoutMs, and with KINF_ERR_REDIS at once while Redis is down.
 */
export class RedisKvIndex implements KvIndex {
  readonly #conn: RedisConnection;
  readonly #prefix: string;
  readonly #lookupTimeoutMs: number;
  readonly #commandTimeoutMs: number;
  readonly #ttlSeconds: number;
  readonly #maxKeysPerCall: number;
  readonly #bases = new Map<string, string>();

  constructor(opts: RedisKvIndexOptions) {
    const o = { ...REDIS_INDEX_DEFAULTS, ...definedOnly(opts) };
    if (!isValidKeyPrefix(o.keyPrefix))
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `invalid Redis key prefix "${o.keyPrefix}" (1-64 of A-Z a-z 0-9 _ . : -)`,
      );
    for (const [name, v, min] of [
      ['lookupTimeoutMs', o.lookupTimeoutMs, 1],
      ['commandTimeoutMs', o.commandTimeoutMs, 1],
      ['blockTtlSeconds', o.blockTtlSeconds, 0],
      ['maxKeysPerCall', o.maxKeysPerCall, 1],
    ] as const) {
      if (!Number.isInteger(v) || v < min)
        throw new KinferenceError('KINF_ERR_CONFIG', `${name} must be an integer >= ${min}, got ${v}`);
    }
    if (!/^rediss?:\/\//.test(opts.url))
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `Redis URL must start with redis:// or rediss://, got "${opts.url}"`,
      );
    this.#prefix = o.keyPrefix;
    this.#lookupTimeoutMs = o.lookupTimeoutMs;
    this.#commandTimeoutMs = o.commandTimeoutMs;
    this.#ttlSeconds = o.blockTtlSeconds;
    this.#maxKeysPerCall = o.maxKeysPerCall;
    this.#conn = new RedisConnection(opts.url, opts);
  }

  async lookup(model: string, keys: readonly BlockKey[]): Promise<LookupResult> {
    return this.#lookup(model, keys, this.#lookupTimeoutMs);
  }

  async listPods(model: string): Promise<PodState[]> {
    return (await this.#lookup(model, [], this.#commandTimeoutMs)).pods.map((p) => p.state);
  }

  async apply(pod: PodRef, ops: readonly IndexOp[]): Promise<void> {
    const calls = applyCalls(this.#base(pod.model), pod.podId, this.#ttlSeconds, ops, this.#maxKeysPerCall);
    if (calls.length === 0) return;
    // In order, one after the other: a NOSCRIPT retry must not let a later call overtake an earlier one.
    await this.#run('apply', this.#commandTimeoutMs * calls.length, async () => {
      for (const call of calls) await SCRIPTS.apply.run(this.#conn.client, call);
    });
  }

  async upsertPodState(pod: PodRef, state: PodStatePatch): Promise<void> {
    await this.#script(
      'upsertPodState',
      SCRIPTS.upsertPod,
      upsertPodCall(this.#base(pod.model), pod.podId, state),
    );
  }

  async removePod(pod: PodRef): Promise<void> {
    await this.#script('removePod', SCRIPTS.removePod, removePodCall(this.#base(pod.model), pod.podId));
  }

  async close(): Promise<void> {
    await this.#conn.close();
  }

  /** Key base of a model, e.g. "kinf:{Ab3_x9Qz}:" (exposed for tests and tools that inspect keys). */
  keyBase(model: string): string {
    return this.#base(model);
  }

  async #lookup(model: string, keys: readonly BlockKey[], timeoutMs: number): Promise<LookupResult> {
    const call = lookupCall(this.#base(model), keys);
    const reply = await this.#run('lookup', timeoutMs, () => SCRIPTS.lookup.run(this.#conn.client, call));
    return parseLookupReply(model, reply);
  }

  async #script(what: string, script: RedisScript, call: ScriptCall): Promise<unknown> {
    return this.#run(what, this.#commandTimeoutMs, () => script.run(this.#conn.client, call));
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

  #base(model: string): string {
    let b = this.#bases.get(model);
    if (b === undefined) {
      if (this.#bases.size >= MAX_CACHED_MODELS) this.#bases.clear();
      b = modelKeyBase(this.#prefix, model);
      this.#bases.set(model, b);
    }
    return b;
  }
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
