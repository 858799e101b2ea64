// IndexReader on Redis: lookup and listPods, both the lookup script in one round trip.
import type { BlockKey, LookupResult, PodState } from '../core/types.js';
import type { IndexReader } from './kv-index.js';
import { parseLookupReply } from './lookup-reply.js';
import type { RedisIndexContext } from './redis-index-context.js';
import { SCRIPTS } from './redis-scripts.js';
import { lookupCall } from './script-args.js';

/** IndexReader on Redis: both calls are the lookup script (lua/lookup.ts), one round trip. */
export class RedisIndexReader implements IndexReader {
  constructor(private readonly ctx: RedisIndexContext) {}

  async lookup(model: string, keys: readonly BlockKey[]): Promise<LookupResult> {
    return this.#lookup(model, keys, this.ctx.settings.lookupTimeoutMs);
  }

  async listPods(model: string): Promise<PodState[]> {
    return (await this.#lookup(model, [], this.ctx.settings.commandTimeoutMs)).pods.map((p) => p.state);
  }

  async #lookup(model: string, keys: readonly BlockKey[], timeoutMs: number): Promise<LookupResult> {
    const call = lookupCall(this.ctx.base(model), keys);
    const reply = await this.ctx.run('lookup', timeoutMs, () =>
      SCRIPTS.lookup.run(this.ctx.conn.client, call),
    );
    return parseLookupReply(model, reply);
  }
}
