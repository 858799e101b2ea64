import { describe, expect, it } from 'vitest';
import { MemoryKvIndex, RedisKvIndex, createKvIndex } from '../../../src/index/index.js';
import { LOOKUP_LUA } from '../../../src/index/lua/lookup.js';
import { SCRIPTS } from '../../../src/index/redis-scripts.js';
import { createHash } from 'node:crypto';

describe('createKvIndex', () => {
  it('builds the implementation the options name', async () => {
    const mem = createKvIndex({ kind: 'memory' });
    expect(mem).toBeInstanceOf(MemoryKvIndex);
    const red = createKvIndex({
      kind: 'redis',
      url: 'redis://127.0.0.1:1/0',
      keyPrefix: 'x',
      lookupTimeoutMs: 10,
    });
    expect(red).toBeInstanceOf(RedisKvIndex);
    await Promise.all([mem.close(), red.close()]);
  });

  it('refuses bad options with KINF_ERR_CONFIG', () => {
    for (const bad of [
      { url: 'http://127.0.0.1:6379' },
      { url: 'redis://x', keyPrefix: 'a{b}' },
      { url: 'redis://x', lookupTimeoutMs: 0 },
      { url: 'redis://x', lookupTimeoutMs: 2.5 },
      { url: 'redis://x', blockTtlSeconds: -1 },
    ])
      expect(() => createKvIndex({ kind: 'redis', ...bad })).toThrow(
        expect.objectContaining({ code: 'KINF_ERR_CONFIG' }),
      );
  });

  it('computes each script SHA1 once, from its exact source', () => {
    expect(SCRIPTS.lookup.sha1).toBe(createHash('sha1').update(LOOKUP_LUA).digest('hex'));
    expect(new Set(Object.values(SCRIPTS).map((s) => s.sha1)).size).toBe(Object.keys(SCRIPTS).length);
  });
});
