// A tokenizer served here by the JS engine, and by the worker's native encoder for everything else.
import type { ByteBpe } from '../bpe/byte-bpe.js';
import type { SpecialTokenFlags, Tokenizer } from '../types.js';
import { callWorker } from './client.js';
import type { LoadedInfo, TokenizerSource } from './protocol.js';

/**
 * The router calls only encodeOrdinary, which the JS engine answers on this thread as before; the native
 * encoder (tiktoken's WASM, HF tokenizers) lives in the worker and answers encode, decode, pre-tokens longer
 * than the engine takes on this thread, and everything when the engine failed its probe check.
 */
export class RemoteTokenizer implements Tokenizer {
  readonly spec: string;
  readonly engine: string;
  readonly specialTokens: ReadonlyMap<string, number>;
  readonly specialTokenFlags: ReadonlyMap<string, SpecialTokenFlags>;
  readonly maxCharsPerToken: number;
  readonly #source: TokenizerSource;
  readonly #fast: ByteBpe | null;
  readonly #maxPieceChars: number;

  constructor(spec: string, source: TokenizerSource, info: LoadedInfo, fast: ByteBpe | null) {
    this.spec = spec;
    this.#source = source;
    this.engine = info.engine;
    this.specialTokens = new Map(info.specials);
    this.specialTokenFlags = new Map(info.flags);
    this.maxCharsPerToken = info.maxCharsPerToken;
    this.#fast = fast;
    this.#maxPieceChars = info.maxPieceChars;
  }

  async encodeOrdinary(text: string, atStart = false): Promise<number[]> {
    if (text.length === 0) return [];
    const ids = this.#fast?.tryEncode(text, this.#maxPieceChars);
    if (ids) return ids;
    return callWorker<number[]>(this.#source, { op: 'encodeOrdinary', spec: this.spec, text, atStart });
  }

  encode(text: string): Promise<number[]> {
    return callWorker<number[]>(this.#source, { op: 'encode', spec: this.spec, text });
  }

  decode(ids: readonly number[]): Promise<string> {
    return callWorker<string>(this.#source, { op: 'decode', spec: this.spec, ids: [...ids] });
  }
}
