// Builds our JS BPE engine from a HF tokenizer.json, when its pipeline is one the engine reproduces exactly.
import { byteLevelAlphabet } from './byte-level.js';
import { ByteBpe } from './byte-bpe.js';
import { PACK } from './merge.js';
import { PairTable } from './pair-table.js';
import { toJsPattern } from './pattern.js';
import { SLICE_ITEMS, runAtOnce, type SlicedBuild } from './slices.js';
import { isRecord } from '../../core/is-record.js';

/** GPT-2's pre-tokenizer regex, which HF ByteLevel applies when `use_regex` is true. */
const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

type Json = Record<string, unknown>;
const unset = (v: unknown): boolean => v === undefined || v === null || v === '';

/** The pre-tokenizer regex of a supported byte-level pipeline, or why it is not supported. */
function preTokenizerPattern(pre: unknown): string | { unsupported: string } {
  const byteLevel = (p: Json, regex: boolean): boolean =>
    p.type === 'ByteLevel' && p.add_prefix_space !== true && (p.use_regex !== false) === regex;
  if (isRecord(pre) && byteLevel(pre, true)) return GPT2_PATTERN;
  if (isRecord(pre) && pre.type === 'Sequence' && Array.isArray(pre.pretokenizers)) {
    const [split, bl, ...rest] = pre.pretokenizers as unknown[];
    if (
      rest.length === 0 &&
      isRecord(split) &&
      isRecord(bl) &&
      split.type === 'Split' &&
      split.behavior === 'Isolated' &&
      split.invert !== true &&
      isRecord(split.pattern) &&
      typeof split.pattern.Regex === 'string' &&
      byteLevel(bl, false)
    )
      return split.pattern.Regex;
  }
  return { unsupported: 'pre-tokenizer is not [Split(Regex, Isolated), ByteLevel] or ByteLevel(use_regex)' };
}

/**
 * The JS engine for a HF tokenizer.json, when its pipeline is one the engine reproduces exactly: a BPE model
 * over GPT-2 byte-level pieces (Qwen, Llama 3, gpt-oss, DeepSeek-style), NFC or no normalizer. Otherwise the
 * reason it is not, and the native library does the work.
 */
export function byteBpeFromHfJson(json: Json): ByteBpe | { unsupported: string } {
  return runAtOnce(byteBpeFromHfJsonSliced(json));
}

/** byteBpeFromHfJson as a build that yields between slices of its vocabulary and merges (slices.ts). */
export function* byteBpeFromHfJsonSliced(json: Json): SlicedBuild<ByteBpe | { unsupported: string }> {
  const tables = yield* hfTables(json);
  return 'unsupported' in tables ? tables : engineFromHfTables(tables);
}

/** What the JS engine of a supported tokenizer.json is made of (plain data: another thread can build it). */
export interface HfTables {
  kind: 'hf';
  pattern: RegExp;
  normalize: 'NFC' | null;
  /** Id of each byte's byte-level symbol. */
  byteIds: number[];
  /** (left id, right id) → rank * PACK + merged id. */
  pairs: PairTable;
  /** The vocabulary, for HF `ignore_merges` (a piece that is one token is that token); else null. */
  wholeWords: Map<string, number> | null;
}

/** The tables of a tokenizer.json whose pipeline the engine reproduces, or why it does not. */
export function* hfTables(json: Json): SlicedBuild<HfTables | { unsupported: string }> {
  const model = json.model;
  if (!isRecord(model) || model.type !== 'BPE') return { unsupported: 'model is not BPE' };
  if (!unset(model.dropout) && model.dropout !== 0) return { unsupported: 'BPE dropout' };
  if (!unset(model.continuing_subword_prefix) || !unset(model.end_of_word_suffix))
    return { unsupported: 'subword prefix/suffix' };
  const norm = json.normalizer;
  const nfc = isRecord(norm) && norm.type === 'NFC';
  if (!unset(norm) && !nfc) return { unsupported: `normalizer ${String(isRecord(norm) && norm.type)}` };
  const source = preTokenizerPattern(json.pre_tokenizer);
  if (typeof source !== 'string') return source;
  const pattern = toJsPattern(source);
  if (pattern === null) return { unsupported: `pre-tokenizer regex not portable: ${source}` };
  if (!isRecord(model.vocab) || !Array.isArray(model.merges)) return { unsupported: 'no vocab or merges' };

  const vocab = new Map<string, number>();
  let n = 0;
  for (const k in model.vocab) {
    const v = model.vocab[k];
    if (typeof v === 'number') vocab.set(k, v);
    if (++n % SLICE_ITEMS === 0) yield;
  }
  if (vocab.size >= PACK || model.merges.length >= PACK) return { unsupported: 'vocabulary too large' };
  const alphabet = byteLevelAlphabet();
  const byteIds = alphabet.map((ch) => vocab.get(ch) ?? -1);
  if (byteIds.includes(-1)) return { unsupported: 'vocabulary lacks a byte-level symbol' };

  const pairs = new PairTable(model.merges.length);
  for (let rank = 0; rank < model.merges.length; rank++) {
    const m = model.merges[rank] as unknown;
    const [a, b] = typeof m === 'string' ? m.split(' ') : Array.isArray(m) ? m : [];
    if (typeof a !== 'string' || typeof b !== 'string') return { unsupported: `merge ${rank} malformed` };
    const ia = vocab.get(a);
    const ib = vocab.get(b);
    const merged = vocab.get(a + b);
    if (rank % SLICE_ITEMS === SLICE_ITEMS - 1) yield;
    if (ia === undefined || ib === undefined || merged === undefined) continue;
    pairs.add(ia, ib, rank * PACK + merged);
  }
  return {
    kind: 'hf',
    pattern,
    normalize: nfc ? 'NFC' : null,
    byteIds,
    pairs,
    wholeWords: model.ignore_merges === true ? vocab : null,
  };
}

/** The engine over built tables. */
export function engineFromHfTables(t: HfTables): ByteBpe {
  const { wholeWords: vocab, pairs } = t;
  const alphabet = byteLevelAlphabet();
  const wholeWord =
    vocab !== null
      ? (bytes: readonly number[]): number | undefined => {
          let s = '';
          for (let i = 0; i < bytes.length; i++) s += alphabet[bytes[i]!]!;
          return vocab.get(s);
        }
      : undefined;
  return new ByteBpe({
    pattern: t.pattern,
    keepGaps: true,
    normalize: t.normalize,
    byteIds: t.byteIds,
    lookup: (a, b) => pairs.get(a, b, -1),
    wholeWord,
  });
}
