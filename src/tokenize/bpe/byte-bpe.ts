// ByteBpe: our plain-JavaScript byte-level BPE tokenizer (regex pre-tokenizer, word cache, merges).
import { mergeWord, type PairLookup } from './merge.js';
import { utf8Bytes } from './byte-level.js';

export interface ByteBpeOptions {
  /** Pre-tokenizer regex (global, unicode). */
  pattern: RegExp;
  /** Text between matches becomes a piece too (HF Split "Isolated"); tiktoken drops it (it never occurs). */
  keepGaps: boolean;
  /** Unicode normalization applied before pre-tokenizing (HF `NFC` normalizer), or none. */
  normalize: 'NFC' | null;
  /** Id of each single byte. */
  byteIds: readonly number[];
  lookup: PairLookup;
  /** A piece whose bytes are one vocabulary entry is that token, without merging (HF `ignore_merges`). */
  wholeWord?: (bytes: readonly number[]) => number | undefined;
  /** Pieces remembered (FIFO); natural text repeats a few thousand words. */
  wordCacheEntries?: number;
}

/**
 * A string that does not share memory with the text it was cut from. V8 represents a substring of 13 or
 * more characters as a view into its parent, so a cached word would keep its whole prompt (up to megabytes)
 * alive; concatenating then slicing makes V8 flatten a fresh copy of just the word.
 */
function ownCopy(s: string): string {
  return s.length < 13 ? s : ` ${s}`.slice(1);
}

/** Pieces longer than this are not cached: they are rare and would crowd out the common words. */
const CACHE_MAX_PIECE = 64;
/** The word cache's byte budget (a piece's UTF-16 key, its ids array and ~80 bytes of Map entry each). */
export const WORD_CACHE_BYTES = 8 * 1024 * 1024;
const wordCost = (piece: string, ids: readonly number[]): number => 80 + piece.length * 2 + ids.length * 8;

/**
 * A byte-level BPE tokenizer in plain JavaScript: pre-tokenize with the model's regex, then look each piece
 * up in a word cache and merge only the pieces not seen before. This is how the native libraries work too,
 * without the per-call crossing into native code and the offset bookkeeping, which make them 5–10× slower
 * on prompts (bench:tokenizers). Equality with the native libraries is property-tested.
 */
export class ByteBpe {
  readonly #o: ByteBpeOptions;
  readonly #cache = new Map<string, readonly number[]>();
  readonly #cacheMax: number;
  #cacheBytes = 0;
  readonly #bytes: number[] = [];

  constructor(opts: ByteBpeOptions) {
    this.#o = opts;
    this.#cacheMax = opts.wordCacheEntries ?? 50_000;
  }

  encode(input: string): number[] {
    return this.tryEncode(input, Infinity)!;
  }

  /**
   * Like encode, or null as soon as a pre-token is longer than `maxPieceChars` (a whitespace run or a blob
   * of thousands of characters): merging one costs ~1.5 µs per byte on this thread, so a caller that has
   * an off-thread encoder hands such text to it instead of blocking the event loop.
   */
  tryEncode(input: string, maxPieceChars: number): number[] | null {
    const text = this.#o.normalize === 'NFC' ? input.normalize('NFC') : input;
    const out: number[] = [];
    const re = this.#o.pattern;
    re.lastIndex = 0;
    let end = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      if (m[0].length === 0) {
        re.lastIndex++;
        continue;
      }
      if (m[0].length > maxPieceChars || (this.#o.keepGaps && m.index - end > maxPieceChars)) return null;
      if (m.index > end && this.#o.keepGaps) this.#piece(text.slice(end, m.index), out);
      this.#piece(m[0], out);
      end = m.index + m[0].length;
    }
    if (end < text.length && this.#o.keepGaps) {
      if (text.length - end > maxPieceChars) return null;
      this.#piece(text.slice(end), out);
    }
    return out;
  }

  #piece(piece: string, out: number[]): void {
    const hit = this.#cache.get(piece);
    if (hit !== undefined) {
      for (let i = 0; i < hit.length; i++) out.push(hit[i]!);
      return;
    }
    const bytes = utf8Bytes(piece, this.#bytes);
    const whole = this.#o.wholeWord?.(bytes);
    let ids: number[];
    if (whole !== undefined) ids = [whole];
    else {
      ids = new Array<number>(bytes.length);
      for (let i = 0; i < bytes.length; i++) ids[i] = this.#o.byteIds[bytes[i]!]!;
      ids = mergeWord(ids, this.#o.lookup);
    }
    if (piece.length <= CACHE_MAX_PIECE) {
      // Bounded by entries and by bytes; the oldest words go first.
      this.#cacheBytes += wordCost(piece, ids);
      for (const [k, v] of this.#cache) {
        if (this.#cache.size < this.#cacheMax && this.#cacheBytes <= WORD_CACHE_BYTES) break;
        this.#cache.delete(k);
        this.#cacheBytes -= wordCost(k, v);
      }
      this.#cache.set(ownCopy(piece), ids);
    }
    for (let i = 0; i < ids.length; i++) out.push(ids[i]!);
  }
}
