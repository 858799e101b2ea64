// The prompt tokenizer: segment cache in front of a tokenizer, with bounded work for over-long prompts.
import { SegmentCache, segmentKey, type SegmentCacheStats } from './segment-cache.js';
import { createSpecialSplitter } from './special-splitter.js';
import type { PromptTokenizer, TokenizeResult, Tokenizer } from './types.js';

/**
 * Characters tokenized per requested token at most. Prose runs ~4 characters per token and code ~3, so 8 leaves
 * room for sparse text while bounding the work for a 10 MB body to 8 × maxTokens characters.
 */
export const CHARS_PER_TOKEN_BUDGET = 8;
/** Characters of each window sampled to estimate a long prompt's density (start, middle, end). */
const DENSITY_SAMPLE_CHARS = 8192;
/** The density-based budget keeps this margin over maxTokens at the densest sampled rate. */
const DENSITY_MARGIN = 1.25;

/**
 * Prompts at least this long are memoized whole (text → tokens): the same long body again (a retry, a client
 * re-sending) then skips the split, a hash per segment and the copy. Looked up by string comparison, not a
 * hash: the render memo (tokenize/render-memo.ts) hands out the very string it rendered before, which compares
 * equal at once, and a new turn differs in length, so a miss costs no pass over the text.
 */
export const PROMPT_MEMO_MIN_CHARS = 65_536;
/** The whole-prompt memo's budget: 2 bytes per character of text plus 8 per token id, ~4 prompts of 240k tokens. */
export const PROMPT_MEMO_BYTES = 24 << 20;

interface MemoEntry {
  text: string;
  maxTokens: number;
  result: TokenizeResult;
  bytes: number;
}

export interface PromptTokenizerOptions {
  /** Segment cache budget in bytes (4 bytes per token plus per-entry overhead). */
  maxBytes: number;
  /** The whole-prompt memo's budget in bytes (default PROMPT_MEMO_BYTES; 0 turns it off). */
  memoBytes?: number;
}

type Part = Uint32Array | number | string | Promise<Uint32Array>;
interface Seen {
  parts: Part[];
  keys: string[];
  /** At least the pieces' token count. */
  bound: number;
  cachedChars: number;
}

export interface CachedPromptTokenizer extends PromptTokenizer {
  stats(): SegmentCacheStats;
  /** The whole-prompt memo (long prompts): entries, bytes held, hits. */
  memoStats(): { entries: number; bytes: number; hits: number };
}

const isWhitespace = (c: number): boolean =>
  c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0b;

/**
 * Where to cut an over-long prompt. Prefers a position just after a line break followed by non-whitespace,
 * which is a pre-token boundary for GPT-style regex pre-tokenizers (tiktoken, Qwen, Llama 3), so the tokens
 * before the cut equal those of the full text. Falls back to the budget itself (never splitting a surrogate
 * pair), where the last few tokens before the cut may differ from a full tokenization.
 */
export function safeCut(text: string, budget: number): number {
  if (text.length <= budget) return text.length;
  const floor = Math.floor(budget / 2);
  for (let p = budget; p > floor; p--)
    if (text.charCodeAt(p - 1) === 0x0a && !isWhitespace(text.charCodeAt(p))) return p;
  const c = text.charCodeAt(budget - 1);
  return c >= 0xd800 && c <= 0xdbff ? budget - 1 : budget;
}

/**
 * How many characters to tokenize for at most `maxTokens` tokens. CHARS_PER_TOKEN_BUDGET fits prose and
 * code, but dense text runs far fewer characters per token (base64 ~1.4, emoji under 1), and tokenizing
 * 8 × maxTokens characters of it took seconds on the plugin server's one thread, for tokens then thrown
 * away. So a prompt long enough to exceed maxTokens is sampled in three windows, and the budget follows the
 * densest of them.
 */
async function charBudget(tokenizer: Tokenizer, text: string, maxTokens: number): Promise<number> {
  const fixed = maxTokens * CHARS_PER_TOKEN_BUDGET;
  // Up to a character per token (denser text this short costs little to tokenize whole): not worth sampling.
  if (text.length <= Math.max(maxTokens, 3 * DENSITY_SAMPLE_CHARS)) return fixed;
  let densest = CHARS_PER_TOKEN_BUDGET;
  const last = text.length - DENSITY_SAMPLE_CHARS;
  for (const start of [0, Math.floor(last / 2), last]) {
    const w = text.slice(start, start + DENSITY_SAMPLE_CHARS);
    const n = (await tokenizer.encodeOrdinary(w, start === 0)).length;
    if (n > 0) densest = Math.min(densest, w.length / n);
  }
  return Math.min(fixed, Math.ceil(maxTokens * densest * DENSITY_MARGIN));
}

/**
 * Prompt tokenizer with a segment cache: the rendered prompt is split on the tokenizer's special tokens and
 * each text segment's tokens are looked up by content hash, so a multiturn request or a shared system prompt
 * only tokenizes its new text. Equal to `tokenizer.encode(text)` token for token (property-tested).
 */
export function createPromptTokenizer(
  tokenizer: Tokenizer,
  opts: PromptTokenizerOptions,
): CachedPromptTokenizer {
  const cache = new SegmentCache(opts.maxBytes);
  const memo: MemoEntry[] = []; // most recent first
  let memoBytes = 0;
  let memoHits = 0;
  const memoMax = opts.memoBytes ?? PROMPT_MEMO_BYTES;
  const splitter = createSpecialSplitter(tokenizer.specialTokens, tokenizer.specialTokenFlags);

  async function encodeSegment(text: string, atStart: boolean, key: string): Promise<Uint32Array> {
    const tokens = Uint32Array.from(await tokenizer.encodeOrdinary(text, atStart));
    cache.set(key, tokens);
    return tokens;
  }

  /** The text's pieces: special token ids, cached segments' tokens, and new segments still as text. */
  function lookUp(text: string): Seen {
    const pieces = splitter.split(text);
    const parts: Part[] = new Array<Part>(pieces.length);
    const keys: string[] = new Array<string>(pieces.length);
    let bound = 0;
    let cachedChars = 0;
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i] as string | number;
      if (typeof piece === 'number') {
        parts[i] = piece;
        bound += 1;
      } else if (piece.length === 0) parts[i] = new Uint32Array(0);
      else {
        const key = segmentKey(piece, i === 0);
        const hit = cache.get(key);
        if (hit !== undefined) {
          parts[i] = hit;
          cachedChars += piece.length;
          bound += hit.length;
        } else {
          parts[i] = piece;
          keys[i] = key;
          bound += 3 * piece.length + 1; // + 1: a prefix a pre-tokenizer may add (Metaspace's ▁)
        }
      }
    }
    return { parts, keys, bound, cachedChars };
  }

  return {
    tokenizer,
    stats: () => cache.stats(),
    memoStats: () => ({ entries: memo.length, bytes: memoBytes, hits: memoHits }),
    async tokenize(text: string, maxTokens: number): Promise<TokenizeResult> {
      if (!Number.isInteger(maxTokens) || maxTokens < 1)
        throw new RangeError(`maxTokens must be >= 1, got ${maxTokens}`);
      const memoize = text.length >= PROMPT_MEMO_MIN_CHARS;
      const at = memoize
        ? memo.findIndex((e) => e.text.length === text.length && e.maxTokens === maxTokens && e.text === text)
        : -1;
      const known = at < 0 ? undefined : memo[at]!.result;
      if (at > 0) memo.unshift(...memo.splice(at, 1));
      // The memo's own array (readonly by type): copying 240k ids cost as much as the rest of a hit (10+ ms loaded),
      // and freezing it made every later read of a new turn's tokens (a holey frozen array) slower in the keys step.
      if (known !== undefined) {
        memoHits++;
        return {
          tokens: known.tokens,
          truncated: known.truncated,
          cachedChars: text.length,
          tokenizedChars: 0,
        };
      }
      // The split and the cache lookups first, on the whole text: their bound on its tokens (cached segments
      // exactly, new text at most 3 per UTF-16 unit, as UTF-8 bytes) spares a long prompt that fits maxTokens
      // the density sampling below (three 8k-character windows tokenized on every request).
      let cut = text.length;
      let seen = lookUp(text);
      if (seen.bound > maxTokens) {
        cut = safeCut(text, await charBudget(tokenizer, text, maxTokens));
        if (cut < text.length) seen = lookUp(text.slice(0, cut));
      }
      const { parts, keys } = seen;
      const pending = new Map<string, Promise<Uint32Array>>();
      let cachedChars = seen.cachedChars;
      let tokenizedChars = 0;
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i]!;
        if (typeof part !== 'string') continue;
        const key = keys[i]!;
        let p = pending.get(key);
        if (p === undefined) {
          p = encodeSegment(part, i === 0, key);
          pending.set(key, p);
          tokenizedChars += part.length;
        } else cachedChars += part.length;
        parts[i] = p;
      }
      // Uncached segments are encoded concurrently (the HF binding runs them on the thread pool).
      if (pending.size > 0) await Promise.all(pending.values());
      const resolved: (Uint32Array | number)[] = new Array(parts.length);
      let total = 0;
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i]!;
        const r = (part instanceof Promise ? await part : part) as Uint32Array | number;
        resolved[i] = r;
        total += typeof r === 'number' ? 1 : r.length;
      }
      const over = total > maxTokens;
      const tokens: number[] = new Array<number>(Math.min(total, maxTokens));
      let n = 0;
      for (let i = 0; i < resolved.length && n < tokens.length; i++) {
        const r = resolved[i]!;
        if (typeof r === 'number') tokens[n++] = r;
        else {
          const m = Math.min(r.length, tokens.length - n);
          for (let j = 0; j < m; j++) tokens[n + j] = r[j]!;
          n += m;
        }
      }
      const truncated = over || cut < text.length;
      const bytes = 2 * text.length + 8 * n + 256;
      if (memoize && bytes <= memoMax) {
        memo.unshift({
          text,
          maxTokens,
          result: { tokens, truncated, cachedChars: 0, tokenizedChars: 0 },
          bytes,
        });
        memoBytes += bytes;
        while (memoBytes > memoMax) memoBytes -= memo.pop()!.bytes;
      }
      return { tokens, truncated, cachedChars, tokenizedChars };
    },
  };
}
