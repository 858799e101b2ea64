import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/** Keys and arguments of one script call (what the pure builders in script-args.ts produce). */
export interface ScriptCall {
  keys: string[];
  args: (string | Buffer)[];
}

/**
 * A Lua script loaded the ioredis way: SHA1 computed once; EVALSHA; on NOSCRIPT (a restarted or flushed
 * server, or a failover to a replica that never saw it) SCRIPT LOAD and retry once.
 */
export class RedisScript {
  readonly sha1: string;

  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha1 = createHash('sha1').update(source, 'utf8').digest('hex');
  }

  async run(client: Redis, call: ScriptCall): Promise<unknown> {
    try {
      return await client.evalsha(this.sha1, call.keys.length, ...call.keys, ...call.args);
    } catch (e) {
      if (!isNoScript(e)) throw e;
      await client.script('LOAD', this.source);
      return client.evalsha(this.sha1, call.keys.length, ...call.keys, ...call.args);
    }
  }
}

export function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('NOSCRIPT');
}
