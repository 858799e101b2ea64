// RedisScript: runs a Lua script by SHA1, and by its source once on NOSCRIPT.
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/** Keys and arguments of one script call (what the pure builders in script-args.ts produce). */
export interface ScriptCall {
  keys: string[];
  args: (string | Buffer)[];
}

/**
 * A Lua script run by its SHA1 (EVALSHA); on NOSCRIPT (a restarted or flushed server, a failover to a
 * replica that never saw it, a Cluster shard that never ran it) once by its source (EVAL, which also caches
 * it there). Not SCRIPT LOAD: a Cluster client sends that, keyless, to a random node.
 */
export class RedisScript {
  readonly sha1: string;

  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha1 = createHash('sha1').update(source, 'utf8').digest('hex');
  }

  async run(client: Redis | Cluster, call: ScriptCall): Promise<unknown> {
    try {
      return await client.evalsha(this.sha1, call.keys.length, ...call.keys, ...call.args);
    } catch (e) {
      if (!isNoScript(e)) throw e;
      return client.eval(this.source, call.keys.length, ...call.keys, ...call.args);
    }
  }
}

export function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('NOSCRIPT');
}
