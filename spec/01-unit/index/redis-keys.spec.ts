import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  KEY_SUFFIX,
  appliedKey,
  blockRedisKey,
  isValidKeyPrefix,
  modelKeyBase,
  modelTag,
  podsKey,
  seqKey,
  stateKey,
} from '../../../src/index/redis-keys.js';

describe('redis keys', () => {
  it('tags a model with 8 base64url characters, stable and free of braces', () => {
    expect(modelTag('Qwen/Qwen3-8B')).toBe(modelTag('Qwen/Qwen3-8B'));
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (m) => {
        expect(modelTag(m)).toMatch(/^[A-Za-z0-9_-]{8}$/);
      }),
    );
    const tags = new Set(Array.from({ length: 2000 }, (_, i) => modelTag(`model-${i}`)));
    expect(tags.size).toBe(2000);
  });

  it('builds every key of a model from one base with one hash tag', () => {
    const base = modelKeyBase('kinf', 'Qwen/Qwen3-8B');
    expect(base).toBe(`kinf:{${modelTag('Qwen/Qwen3-8B')}}:`);
    expect(podsKey(base)).toBe(`${base}pods`);
    expect(seqKey(base)).toBe(`${base}seq`);
    expect(appliedKey(base)).toBe(`${base}applied`);
    expect(stateKey(base, 12)).toBe(`${base}s:12`);
    const k = blockRedisKey(base, Buffer.from('00ff10203040a0b0', 'hex'));
    expect(k.subarray(0, base.length + 2).toString()).toBe(base + KEY_SUFFIX.block);
    expect(k.subarray(base.length + 2)).toEqual(
      Buffer.from([0x00, 0xff, 0x10, 0x20, 0x30, 0x40, 0xa0, 0xb0]),
    );
  });

  it('accepts the plugin config key prefixes and refuses braces (they would break the hash tag)', () => {
    for (const ok of ['kinf', 'prod:kv', 'a.b-c_d']) expect(isValidKeyPrefix(ok)).toBe(true);
    for (const bad of ['', 'a{b}', 'has space', 'x'.repeat(65)]) expect(isValidKeyPrefix(bad)).toBe(false);
  });
});
