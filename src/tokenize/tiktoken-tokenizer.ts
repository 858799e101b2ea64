// The `tiktoken:` tokenizer (o200k_base, o200k_harmony, cl100k_base), gpt-oss specials as vLLM parses them.
import { get_encoding, type Tiktoken, type TiktokenEncoding } from 'tiktoken';
import type { ByteBpe } from './bpe/byte-bpe.js';
import { byteBpeFromTiktoken, byteBpeFromTiktokenAsync } from './bpe/from-tiktoken.js';
import { checkedEngine, ENGINE_PROBE, nativeEngineNote } from './bpe/probe.js';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Tokenizer } from './types.js';

/**
 * gpt-oss special tokens as vLLM parses them in prompt text. vLLM tokenizes with the HF tokenizer shipped
 * with openai/gpt-oss-*, whose added tokens are exactly ids 199998–200018 (tokenizer_config.json
 * `added_tokens_decoder`); openai/harmony and tiktoken's o200k_harmony agree on every named id below.
 * tiktoken additionally registers `<|reserved_200019|>`…`<|reserved_201087|>`; vLLM's tokenizer treats those
 * strings as plain text, so we do too. Pinned by spec/01-unit/tokenize/tiktoken-tokenizer.spec.ts.
 */
export const HARMONY_SPECIAL_TOKENS: Readonly<Record<string, number>> = {
  '<|startoftext|>': 199998,
  '<|endoftext|>': 199999,
  '<|reserved_200000|>': 200000,
  '<|reserved_200001|>': 200001,
  '<|return|>': 200002,
  '<|constrain|>': 200003,
  '<|reserved_200004|>': 200004,
  '<|channel|>': 200005,
  '<|start|>': 200006,
  '<|end|>': 200007,
  '<|message|>': 200008,
  '<|reserved_200009|>': 200009,
  '<|reserved_200010|>': 200010,
  '<|reserved_200011|>': 200011,
  '<|call|>': 200012,
  '<|reserved_200013|>': 200013,
  '<|reserved_200014|>': 200014,
  '<|reserved_200015|>': 200015,
  '<|reserved_200016|>': 200016,
  '<|reserved_200017|>': 200017,
  '<|endofprompt|>': 200018,
};

/** Special tokens of the base encodings (tiktoken's registry; the library does not export them). */
const BASE_SPECIALS: Readonly<Record<string, Readonly<Record<string, number>>>> = {
  o200k_base: { '<|endoftext|>': 199999, '<|endofprompt|>': 200018 },
  cl100k_base: {
    '<|endoftext|>': 100257,
    '<|fim_prefix|>': 100258,
    '<|fim_middle|>': 100259,
    '<|fim_suffix|>': 100260,
    '<|endofprompt|>': 100276,
  },
};

export const TIKTOKEN_ENCODINGS = ['o200k_base', 'o200k_harmony', 'cl100k_base'] as const;
export type TiktokenEncodingName = (typeof TIKTOKEN_ENCODINGS)[number];

/**
 * The longest token of each base encoding, in bytes: what HF's get_vocab() spells in as many characters.
 * Reading it from the encoder costs a quarter second at load; spec/01-unit/tokenize/tokenizers.spec.ts
 * checks these against it.
 */
export const MAX_TOKEN_BYTES: Readonly<Record<'o200k_base' | 'cl100k_base', number>> = {
  o200k_base: 128,
  cl100k_base: 128,
};

export function isTiktokenEncoding(name: string): name is TiktokenEncodingName {
  return (TIKTOKEN_ENCODINGS as readonly string[]).includes(name);
}

const utf8 = new TextDecoder('utf-8');

class TiktokenTokenizer implements Tokenizer {
  readonly spec: string;
  readonly specialTokens: ReadonlyMap<string, number>;
  readonly engine: string;
  readonly #enc: Tiktoken;
  /** The JS engine for plain text, used only if it matched tiktoken on the probe text. */
  readonly #fast: ByteBpe | null;
  readonly maxCharsPerToken: number;

  constructor(
    spec: string,
    enc: Tiktoken,
    specials: Readonly<Record<string, number>>,
    fast: ByteBpe | { unsupported: string },
    maxTokenBytes: number,
  ) {
    this.spec = spec;
    this.#enc = enc;
    this.specialTokens = new Map(Object.entries(specials));
    // HF's byte-level spelling of a token has one character per byte; special tokens are spelled as is.
    this.maxCharsPerToken = Math.max(maxTokenBytes, ...Object.keys(specials).map((t) => [...t].length));
    const checked =
      'unsupported' in fast
        ? { engine: null, note: nativeEngineNote(fast.unsupported) }
        : checkedEngine(spec, fast, enc.encode_ordinary(ENGINE_PROBE));
    this.#fast = checked.engine;
    this.engine = checked.note;
  }

  // Both engines are synchronous; the Promise only satisfies the shared interface.
  async encodeOrdinary(text: string): Promise<number[]> {
    if (this.#fast !== null) return this.#fast.encode(text);
    return Array.from(this.#enc.encode_ordinary(text));
  }

  async encode(text: string): Promise<number[]> {
    return Array.from(this.#enc.encode(text, 'all', []));
  }

  async decode(ids: readonly number[]): Promise<string> {
    return utf8.decode(this.#enc.decode(Uint32Array.from(ids)));
  }
}

/**
 * Builds `tiktoken:<encoding>`: plain text is encoded by our JS byte-level BPE when it matches tiktoken on the
 * probe text, else by tiktoken's WASM. `engine` replaces the JS engine (bench:tokenizers compares the two).
 * The encoder lives for the process (callers cache it per spec).
 */
export function createTiktokenTokenizer(
  spec: string,
  encoding: TiktokenEncodingName,
  engine?: ByteBpe | { unsupported: string },
): Tokenizer {
  if (encoding === 'o200k_harmony') {
    const extra: Record<string, number> = {};
    for (const [t, id] of Object.entries(HARMONY_SPECIAL_TOKENS))
      if (BASE_SPECIALS.o200k_base?.[t] === undefined) extra[t] = id;
    return new TiktokenTokenizer(
      spec,
      get_encoding('o200k_base', extra),
      HARMONY_SPECIAL_TOKENS,
      engine ?? byteBpeFromTiktoken('o200k_base'),
      MAX_TOKEN_BYTES.o200k_base,
    );
  }
  const specials = BASE_SPECIALS[encoding] ?? {};
  return new TiktokenTokenizer(
    spec,
    get_encoding(encoding as TiktokenEncoding),
    specials,
    engine ?? byteBpeFromTiktoken(encoding),
    MAX_TOKEN_BYTES[encoding],
  );
}

/**
 * createTiktokenTokenizer without holding the event loop where the libraries allow it: our JS engine's rank
 * file is read asynchronously and its table built in slices. tiktoken's own encoder (its ranks are inside the
 * WASM module) is built by one synchronous get_encoding call: that step cannot leave the event loop here.
 */
export async function createTiktokenTokenizerAsync(
  spec: string,
  encoding: TiktokenEncodingName,
): Promise<Tokenizer> {
  const base = encoding === 'o200k_harmony' ? 'o200k_base' : encoding;
  const engine = await byteBpeFromTiktokenAsync(base);
  await nextTurn();
  return createTiktokenTokenizer(spec, encoding, engine);
}
