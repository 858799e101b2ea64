// What the Redis index's roles share: the connection, the settings, model key bases, script runs.
import { notLeaseHolderReply } from './lua/fence.js';
import type { WriteFence } from './script-args.js';
import {
  RedisConnection,
  asIndexError,
  withDeadline,
  type IndexLog,
  type RedisConnectionOptions,
} from './redis-connection.js';
import { modelKeyBase } from './redis-keys.js';
import type { RedisScript, ScriptCall } from './script.js';
import { LeaseLostError } from './writer-lease.js';

/** The Redis index's settings, validated (redis-index.ts). */
export interface RedisIndexSettings {
  keyPrefix: string;
  lookupTimeoutMs: number;
  commandTimeoutMs: number;
  blockTtlSeconds: number;
  maxKeysPerCall: number;
  verifyIntervalMs: number;
  log: IndexLog | null;
  /** The lease holder value the write scripts check, and which lease (null: unfenced). */
  fence: WriteFence | null;
}

const MAX_CACHED_MODELS = 4096;

/**
 * What every role of the Redis index (reader, writer, reservations, handoff) shares: one connection, the
 * settings, the key base of each model, and the one way to run a command: under a deadline, after the
 * connection is ready, its failures as KinferenceErrors.
 */
export class RedisIndexContext {
  readonly conn: RedisConnection;
  readonly #bases = new Map<string, string>();

  constructor(
    url: string,
    connOpts: RedisConnectionOptions,
    readonly settings: RedisIndexSettings,
  ) {
    this.conn = new RedisConnection(url, connOpts);
  }

  /** Key base of a model, e.g. "kinf:{Ab3_x9Qz}:". */
  base(model: string): string {
    let b = this.#bases.get(model);
    if (b === undefined) {
      if (this.#bases.size >= MAX_CACHED_MODELS) this.#bases.clear();
      b = modelKeyBase(this.settings.keyPrefix, model);
      this.#bases.set(model, b);
    }
    return b;
  }

  /** One script call under the writers' budget (commandTimeoutMs). */
  async script(what: string, script: RedisScript, call: ScriptCall): Promise<unknown> {
    return this.run(what, this.settings.commandTimeoutMs, () => script.run(this.conn.client, call));
  }

  async run<T>(what: string, timeoutMs: number, work: (expired: () => boolean) => Promise<T>): Promise<T> {
    try {
      return await withDeadline(
        async (expired) => {
          await this.conn.ready();
          return work(expired);
        },
        timeoutMs,
        what,
      );
    } catch (e) {
      throw asIndexError(e, what);
    }
  }

  /** A fenced script's refusal as a LeaseLostError (KINF_ERR_LEASE_LOST): another process holds the lease. */
  fenceCheck(reply: unknown, model: string, what: string): void {
    const holder = notLeaseHolderReply(reply);
    if (holder !== null) throw new LeaseLostError(model, holder, what);
  }
}
