import { describe, expect, it } from 'vitest';
import { SAME_BODY_MIN_BYTES, SameBodyMemo } from '../../../src/router/same-body-memo.js';
import type { PrepareResult } from '../../../src/tokenize/off-thread/protocol.js';

const result = (keys: number, over: Partial<PrepareResult & { ok: true }> = {}): PrepareResult => ({
  ok: true,
  model: 'm',
  lora: null,
  maxTokens: null,
  user: null,
  hasVllmXargs: false,
  repeatable: true,
  keys: Array.from({ length: keys }, (_, i) => i.toString(16).padStart(16, '0')),
  promptTokens: keys * 16,
  truncated: false,
  promptChars: { cached: 10, tokenized: 90 },
  timings: { parseMs: 1, templateMs: 2, tokenizeMs: 3, keysMs: 4 },
  ...over,
});
const bytes = (n: number, fill = 7): Uint8Array => new Uint8Array(n).fill(fill);

describe('SameBodyMemo (the same long body again skips the worker)', () => {
  it('hits only the very same bytes under the very same settings, and says nothing was re-tokenized', () => {
    const memo = new SameBodyMemo();
    const settings = {};
    const body = bytes(SAME_BODY_MIN_BYTES);
    memo.set(body, settings, result(8));
    const hit = memo.get(bytes(SAME_BODY_MIN_BYTES), settings);
    expect(hit?.ok && hit.keys.length).toBe(8);
    expect(hit?.promptChars).toEqual({ cached: 100, tokenized: 0 });
    expect(hit?.timings.templateMs).toBe(0);
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES, 8), settings)).toBeUndefined();
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES + 1), settings)).toBeUndefined();
    // Other settings (the pods' context windows changed): prepared anew.
    expect(memo.get(body, {})).toBeUndefined();
    expect(memo.stats().hits).toBe(1);
  });

  it('keeps its own copy of the bytes, and only results the body alone decides', () => {
    const memo = new SameBodyMemo();
    const settings = {};
    const body = bytes(SAME_BODY_MIN_BYTES);
    memo.set(body, settings, result(8));
    body.fill(9); // the caller's buffer reused for another request
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES, 9), settings)).toBeUndefined();
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES, 7), settings)).toBeDefined();

    const clocked = new SameBodyMemo();
    clocked.set(bytes(SAME_BODY_MIN_BYTES), settings, result(8, { repeatable: false }));
    clocked.set(bytes(SAME_BODY_MIN_BYTES, 1), settings, { ok: false });
    clocked.set(bytes(SAME_BODY_MIN_BYTES - 1), settings, result(8));
    expect(clocked.stats().entries).toBe(0);
  });

  it('stays within its bytes and entries, dropping the least recently used', () => {
    const memo = new SameBodyMemo(4 * (SAME_BODY_MIN_BYTES + 1024), 3);
    const settings = {};
    for (let i = 0; i < 5; i++) memo.set(bytes(SAME_BODY_MIN_BYTES, i), settings, result(1));
    expect(memo.stats().entries).toBe(3);
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES, 0), settings)).toBeUndefined();
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES, 2), settings)).toBeDefined(); // now the most recent
    memo.set(bytes(SAME_BODY_MIN_BYTES, 5), settings, result(1));
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES, 3), settings)).toBeUndefined();
    expect(memo.get(bytes(SAME_BODY_MIN_BYTES, 2), settings)).toBeDefined();
    const small = new SameBodyMemo(SAME_BODY_MIN_BYTES + 2048, 8);
    small.set(bytes(SAME_BODY_MIN_BYTES, 1), settings, result(1));
    small.set(bytes(SAME_BODY_MIN_BYTES, 2), settings, result(1));
    expect(small.stats().entries).toBe(1);
    expect(small.stats().bytes).toBeLessThanOrEqual(SAME_BODY_MIN_BYTES + 2048);
  });
});
