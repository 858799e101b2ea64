import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { get_encoding, type TiktokenEncoding } from 'tiktoken';
import { Tokenizer as NativeTokenizer } from 'tokenizers';
import { describe, expect, it, vi } from 'vitest';
import { ByteBpe } from '../../../src/tokenize/bpe/byte-bpe.js';
import { byteBpeFromHfJson } from '../../../src/tokenize/bpe/from-hf.js';
import { byteBpeFromTiktoken } from '../../../src/tokenize/bpe/from-tiktoken.js';
import { mergeByHeap, mergeByScan, PACK } from '../../../src/tokenize/bpe/merge.js';
import { toJsPattern } from '../../../src/tokenize/bpe/pattern.js';
import { PairTable } from '../../../src/tokenize/bpe/pair-table.js';
import { createHfTokenizer, loadTokenizer } from '../../../src/tokenize/index.js';
import { QWEN3_DIR } from '../../helpers/qwen3.js';

const QWEN3_JSON = readFileSync(`${QWEN3_DIR}tokenizer.json`, 'utf8');

/** Pieces chosen where regex engines and BPE implementations tend to disagree. */
const TRICKY = [
  'a',
  'Z',
  's',
  'S',
  'k',
  'K',
  'ſ',
  '\u212a',
  "'",
  '’',
  ' ',
  '  ',
  '\t',
  '\n',
  '\r',
  '\r\n',
  '\u0085',
  '\u00a0',
  '\u3000',
  '\ufeff',
  '\u2028',
  '\u200b',
  '1',
  '23',
  '٣',
  '½',
  'é',
  'e\u0301',
  'ß',
  'ﬁ',
  '你',
  '好',
  '😀',
  '👍🏽',
  '\ud800',
  '\udc00',
  '/',
  '//',
  '.',
  ',',
  '!',
  '-',
  '_',
  '(',
  '{',
  '#',
  '<|',
  'Ελ',
  'рус',
  '\u0300',
  'ǅ',
  'ʰ',
  "'s",
  "'LL",
  "'Re",
  'x'.repeat(70),
  ' '.repeat(20),
  '\n\n\n',
  'hello',
  ' world',
  'naïve',
];
const text = fc.oneof(
  fc.array(fc.constantFrom(...TRICKY), { maxLength: 30 }).map((p) => p.join('')),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
);

async function nativeHf(json: string): Promise<(s: string) => Promise<number[]>> {
  const t = NativeTokenizer.fromString(json);
  return async (s) => (await t.encode(s, null, { addSpecialTokens: false })).getIds();
}
function jsHf(json: string): ByteBpe {
  const e = byteBpeFromHfJson(JSON.parse(json) as Record<string, unknown>);
  if (!(e instanceof ByteBpe)) throw new Error(e.unsupported);
  return e;
}

describe('JS byte-level BPE equals the native libraries token for token', () => {
  it('HF Qwen3 tokenizer.json (NFC, Split regex, ByteLevel) on random text', async () => {
    const ref = await nativeHf(QWEN3_JSON);
    const js = jsHf(QWEN3_JSON);
    await fc.assert(
      fc.asyncProperty(text, async (s) => {
        expect(js.encode(s)).toEqual(await ref(s));
      }),
      { numRuns: 400 },
    );
  });

  it.each(['o200k_base', 'cl100k_base'])('tiktoken %s on random text', (name) => {
    const ref = get_encoding(name as TiktokenEncoding);
    const js = byteBpeFromTiktoken(name);
    if (!(js instanceof ByteBpe)) throw new Error(js.unsupported);
    fc.assert(
      fc.property(text, (s) => {
        expect(js.encode(s)).toEqual(Array.from(ref.encode_ordinary(s)));
      }),
      { numRuns: 400 },
    );
    ref.free();
  });

  it('long words take the heap path and still match (and the heap equals the scan)', async () => {
    const ref = await nativeHf(QWEN3_JSON);
    const js = jsHf(QWEN3_JSON);
    const letters = fc.string({
      unit: fc.constantFrom('a', 'b', 'e', 'r', 't', 'o', 'n'),
      minLength: 49,
      maxLength: 400,
    });
    await fc.assert(
      fc.asyncProperty(letters, async (s) => {
        expect(js.encode(s)).toEqual(await ref(s));
      }),
      { numRuns: 60 },
    );
    for (const s of ['a'.repeat(5000), 'ab'.repeat(3000), '😀'.repeat(300), '你好'.repeat(500)])
      expect(js.encode(s)).toEqual(await ref(s));
    // A toy vocabulary where ties and overlapping pairs matter: the two merge strategies must agree.
    const lookup = (a: number, b: number): number =>
      a === b && a < 4 ? a * PACK + a + 1 : a + 1 === b && a < 6 ? (10 + a) * PACK + 6 : -1;
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 80 }), (ids) => {
        expect(mergeByHeap(ids, lookup)).toEqual(mergeByScan([...ids], lookup));
      }),
    );
  });

  it('HF variants: ignore_merges, ByteLevel(use_regex) alone, merges as "a b" strings, Llama 3 and gpt-oss regexes', async () => {
    const base = JSON.parse(QWEN3_JSON) as Record<string, Record<string, unknown>>;
    const withSplit = (regex: string): Record<string, unknown> => ({
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    });
    // The pre-tokenizer patterns of Meta-Llama-3's and openai/gpt-oss's tokenizer.json (Qwen3's vocabulary
    // and merges stand in for theirs: the regex translation is what differs).
    const LLAMA3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const GPT_OSS =
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const variants = [
      {
        ...base,
        normalizer: null,
        pre_tokenizer: withSplit(LLAMA3),
        model: { ...base.model, ignore_merges: true },
      },
      { ...base, normalizer: null, pre_tokenizer: withSplit(GPT_OSS) },
      { ...base, model: { ...base.model, ignore_merges: true } },
      {
        ...base,
        normalizer: null,
        pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
      },
      {
        ...base,
        model: { ...base.model, merges: (base.model!.merges as string[][]).map((m) => m.join(' ')) },
      },
    ];
    for (const v of variants) {
      const json = JSON.stringify(v);
      const ref = await nativeHf(json);
      const js = jsHf(json);
      await fc.assert(
        fc.asyncProperty(text, async (s) => {
          expect(js.encode(s)).toEqual(await ref(s));
        }),
        { numRuns: 100 },
      );
    }
  }, 90_000); // builds five full Qwen3-size vocabularies, JS and native: ~10 s alone, 30 s+ on a loaded 2-core machine
});

describe('bounded work on pathological text', () => {
  it('tiktoken: a 300k-character whitespace run (tiktoken WASM merges it in O(n²), minutes)', async () => {
    const t = loadTokenizer('tiktoken:o200k_harmony');
    const ids = await t.encodeOrdinary(' '.repeat(300_000));
    expect(ids.length).toBeGreaterThan(0);
    expect(await t.decode(ids)).toBe(' '.repeat(300_000));
  }, 20_000);

  it('HF: a segment with a pre-token over 1,024 characters goes to the native library (off the event loop)', async () => {
    const js = jsHf(QWEN3_JSON);
    expect(js.tryEncode(`hello ${'!'.repeat(1024)}`, 1024)).toBeNull();
    expect(js.tryEncode(`${' '.repeat(1026)}x`, 1024)).toBeNull(); // 1,025 spaces, then " x"
    // " " + 1,023 "!" is a 1,024-character pre-token: still encoded here
    const edge = `hello ${'!'.repeat(1023)}`;
    expect(js.tryEncode(edge, 1024)).toEqual(js.encode(edge));
    const t = loadTokenizer(`hf:${QWEN3_DIR}tokenizer.json`);
    const text = `a run: ${' '.repeat(50_000)}done`;
    expect(await t.encodeOrdinary(text)).toEqual(await (await nativeHf(QWEN3_JSON))(text));
  });
});

describe('word cache memory', () => {
  it('does not keep the prompts its words came from alive', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const js = byteBpeFromTiktoken('cl100k_base');
    if (!(js instanceof ByteBpe)) throw new Error(js.unsupported);
    const word = (i: number): string =>
      [...i.toString(26)].map((c) => String.fromCharCode(97 + parseInt(c, 26))).join('');
    gc();
    const before = process.memoryUsage().heapUsed;
    // 1,000 texts of 20 KB, each with one new 20+-character word the cache keeps: ~40 MB if words pin texts.
    for (let i = 0; i < 1000; i++) js.encode(`${'a '.repeat(10_000)} supercalifragilistic${word(i)}`);
    gc();
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(10e6);
  });
});

describe('PairTable', () => {
  it('maps pairs to values, keeps the first value, reports fullness and clears', () => {
    const t = new PairTable(4);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(fc.nat(1 << 20), fc.nat(1 << 20)), {
          maxLength: 4,
          selector: ([a, b]) => `${a},${b}`,
        }),
        (pairs) => {
          t.clear();
          pairs.forEach(([a, b], i) => t.add(a, b, i * PACK + 7));
          pairs.forEach(([a, b], i) => expect(t.get(a, b, -2)).toBe(i * PACK + 7));
          if (pairs.length > 0) {
            t.add(pairs[0]![0], pairs[0]![1], 99);
            expect(t.get(pairs[0]![0], pairs[0]![1], -2)).toBe(7);
          }
          expect(t.get(1 << 21, 0, -2)).toBe(-2);
          expect(t.size).toBe(pairs.length);
        },
      ),
    );
    const small = new PairTable(1);
    while (!small.full) small.add(small.size, 0, 1);
    expect(() => small.add(1000, 1, 1)).toThrow(RangeError);
  });
});

describe('which pipelines the JS engine takes', () => {
  const base = JSON.parse(QWEN3_JSON) as Record<string, Record<string, unknown>>;
  it.each([
    ['NFKC normalizer', { ...base, normalizer: { type: 'NFKC' } }, 'normalizer NFKC'],
    ['Metaspace', { ...base, pre_tokenizer: { type: 'Metaspace', replacement: '▁' } }, 'pre-tokenizer'],
    ['BPE dropout', { ...base, model: { ...base.model, dropout: 0.1 } }, 'dropout'],
    ['WordPiece', { ...base, model: { type: 'WordPiece', vocab: {} } }, 'not BPE'],
    [
      'add_prefix_space',
      { ...base, pre_tokenizer: { type: 'ByteLevel', add_prefix_space: true } },
      'pre-tokenizer',
    ],
  ])('declines %s', (_name, json, reason) => {
    const e = byteBpeFromHfJson(json);
    expect(e).not.toBeInstanceOf(ByteBpe);
    expect((e as { unsupported: string }).unsupported).toContain(reason);
  });

  it('the shipped tokenizers use it; the reason is shown when they do not', async () => {
    expect(loadTokenizer('tiktoken:o200k_harmony').engine).toBe('js-bpe');
    expect(loadTokenizer('tiktoken:cl100k_base').engine).toBe('js-bpe');
    const qwen = loadTokenizer(`hf:${QWEN3_DIR}tokenizer.json`);
    await qwen.encodeOrdinary('warm up');
    expect(qwen.engine).toBe('js-bpe');
    const meta = loadTokenizer('hf:spec/fixtures/tokenizers/metaspace-first.tokenizer.json');
    await meta.encodeOrdinary('x');
    expect(meta.engine).toMatch(/^native \(/);
  });

  it('falls back to the native library, with a warning, when the JS engine disagrees on the probe', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kinf-tok-'));
    const path = join(dir, 'tokenizer.json');
    writeFileSync(path, QWEN3_JSON);
    const good = jsHf(QWEN3_JSON);
    // An engine that never merges: every byte its own token.
    const broken = new ByteBpe({
      pattern: /[^]+/gu,
      keepGaps: false,
      normalize: null,
      byteIds: Array.from({ length: 256 }, (_, b) => good.encode(String.fromCharCode(b))[0] ?? 0),
      lookup: () => -1,
    });
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const t = createHfTokenizer('hf:broken', path, broken);
      const ids = await t.encodeOrdinary('hello world');
      expect(ids).toEqual(await (await nativeHf(QWEN3_JSON))('hello world'));
      expect(t.engine).toContain('disagreed');
      expect(warn).toHaveBeenCalledWith(expect.stringContaining('disagreed'), 'KinferenceWarning');
    } finally {
      warn.mockRestore();
    }
  });
});

describe('pre-tokenizer regex translation', () => {
  it('uses Unicode White_Space for \\s (JS adds U+FEFF and lacks U+0085)', () => {
    const re = toJsPattern('\\s+')!;
    expect('\u0085'.match(re)).not.toBeNull();
    expect('\ufeff'.match(re)).toBeNull();
  });
  it('expands (?i:…) with Unicode case folding', () => {
    const re = toJsPattern("(?i:'s|'ll)")!;
    for (const s of ["'s", "'S", "'ſ", "'LL", "'lL"]) expect(s.match(re)?.[0]).toBe(s);
    expect(toJsPattern('(?i:ab)')!.source).toBe('(?:[aA][bB])');
    expect(toJsPattern('(?i:k)')!.test('\u212a')).toBe(true);
  });
  it('keeps quantifiers and property classes, declines what has no exact JS meaning', () => {
    expect(toJsPattern('\\p{N}{1,3}| ?[^\\s\\p{L}]+?')).not.toBeNull();
    for (const p of ['a++', '\\p{L}*+', 'a{2}+', '\\d+', '\\w', 'a.b', '(?>a)', '(?i)a', '(?i:a.)', '['])
      expect(toJsPattern(p), p).toBeNull();
  });
});
