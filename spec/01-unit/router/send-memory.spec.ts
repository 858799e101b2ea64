import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import type { BlockKey } from '../../../src/core/types.js';
import { SEND_MEMORY_STRIDE, SendMemory } from '../../../src/router/send-memory.js';

const seed = keySeed({ model: 'm', lora: null, cacheSalt: null });
const keysOf = (tokens: number[]): BlockKey[] => blockKeys(tokens, 16, seed);
const prompt = (blocks: number, base = 1): number[] =>
  Array.from({ length: blocks * 16 }, (_, i) => base + i);

describe('SendMemory: the prompts this router sent to each pod', () => {
  it('credits a prompt sent before in full, and a longer one sharing it to within a stride', () => {
    const mem = new SendMemory();
    const first = prompt(40);
    mem.record('pod-a', keysOf(first));
    expect(mem.prefixBlocks('pod-a', keysOf(first))).toBe(40);
    // A follow-up turn: the first prompt plus more. Sampled keys at blocks 16 and 32 prove 32 blocks.
    expect(mem.prefixBlocks('pod-a', keysOf([...first, ...prompt(10, 90_000)]))).toBe(32);
    expect(mem.prefixBlocks('pod-b', keysOf(first))).toBe(0);
    expect(mem.prefixBlocks('pod-a', keysOf(prompt(40, 50_000)))).toBe(0);
    expect(mem.prefixBlocks('pod-a', [])).toBe(0);
  });

  it('forgets the least recently sent keys past its bound', () => {
    const mem = new SendMemory();
    const [a, b] = [keysOf(prompt(32, 1)), keysOf(prompt(32, 100_000))];
    mem.record('pod-a', a, 4); // blocks 16 and 32 (the last): 2 keys
    mem.record('pod-a', b, 4);
    expect([mem.prefixBlocks('pod-a', a), mem.prefixBlocks('pod-a', b)]).toEqual([32, 32]);
    mem.record('pod-a', a, 4); // a sent again: b is now the older
    const c = keysOf(prompt(32, 200_000));
    mem.record('pod-a', c, 4);
    expect([a, b, c].map((k) => mem.prefixBlocks('pod-a', k))).toEqual([32, 0, 32]);
  });

  it('credits at most the blocks a prompt shares with one that was sent, and at least its whole strides', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 80 }),
        fc.integer({ min: 0, max: 80 }),
        fc.integer({ min: 0, max: 40 }),
        (sentBlocks, sharedBlocks, extraBlocks) => {
          const sent = prompt(sentBlocks);
          const shared = Math.min(sharedBlocks, sentBlocks);
          const asked = [...sent.slice(0, shared * 16), ...prompt(extraBlocks, 1_000_000)];
          const mem = new SendMemory();
          mem.record('p', keysOf(sent));
          const got = mem.prefixBlocks('p', keysOf(asked));
          expect(got).toBeLessThanOrEqual(shared);
          expect(got).toBeGreaterThanOrEqual(Math.floor(shared / SEND_MEMORY_STRIDE) * SEND_MEMORY_STRIDE);
          if (shared === sentBlocks && extraBlocks === 0) expect(got).toBe(sentBlocks);
        },
      ),
    );
  });
});
