// src/tokenize's interfaces: Tokenizer, ChatTemplate, PromptTokenizer and their results.
import type { ChatRequest } from '../core/request.js';

/**
 * A tokenizer as vLLM applies it to a rendered chat prompt (add_special_tokens=false, specials parsed).
 * Encoding is async because the native HF `tokenizers` binding only offers Promise-returning encode/decode
 * (work runs on libuv's thread pool, so a long prompt does not block the gateway's event loop).
 */
export interface Tokenizer {
  /** e.g. "tiktoken:o200k_base" or "hf:/path/tokenizer.json". */
  readonly spec: string;
  /**
   * Which engine encodes plain text: "js-bpe" (our byte-level BPE, checked against the native library at
   * load) or "native (<why>)".
   */
  readonly engine: string;
  /** Special/added tokens that are matched literally in prompt text, with their ids. */
  readonly specialTokens: ReadonlyMap<string, number>;
  /**
   * How literal special tokens absorb neighbouring whitespace (HF `lstrip`/`rstrip`/`single_word`); absent or
   * empty when every token matches exactly its own text. Keyed by token text.
   */
  readonly specialTokenFlags?: ReadonlyMap<string, SpecialTokenFlags>;
  /**
   * Tokens of plain text containing no special token: the unit the segment cache stores. `atStart` is true
   * when the text begins the prompt (some pre-tokenizers, e.g. Metaspace prepend_scheme="first", treat the
   * prompt start differently from text that follows a special token).
   */
  encodeOrdinary(text: string, atStart?: boolean): Promise<number[]>;
  /**
   * The longest token's length in characters, as the tokenizer's vocabulary spells tokens (HF get_vocab():
   * byte-level BPE writes a byte as one character). vLLM's renderer refuses, before tokenizing, a text
   * longer than this × the input tokens it allows. Absent when unknown.
   */
  readonly maxCharsPerToken?: number;
  /** Full prompt encoding without a cache (the reference the cache is tested against). */
  encode(text: string): Promise<number[]>;
  /** Ids → text, for verify-tokenizer and the emulator. */
  decode(ids: readonly number[]): Promise<string>;
}

export interface SpecialTokenFlags {
  lstrip: boolean;
  rstrip: boolean;
  singleWord: boolean;
}

export interface ChatTemplate {
  /** e.g. "chatml" or "hf:/path/tokenizer_config.json". */
  readonly spec: string;
  /** Renders the prompt text exactly as vLLM's chat endpoint would before tokenizing it. */
  render(request: ChatRequest): string;
  /** The render depends on the request alone (no clock: strftime_now), so it may be memoized. */
  readonly pure?: boolean;
}

export interface TokenizeResult {
  /** Read-only: for long prompts (PROMPT_MEMO_MIN_CHARS) the array is shared with the whole-prompt memo. */
  tokens: readonly number[];
  /** True when the prompt was cut at maxTokens. */
  truncated: boolean;
  /** Characters served from the segment cache vs tokenized now (for the span and the bench). */
  cachedChars: number;
  tokenizedChars: number;
}

/** Prompt tokenizer with the segment cache in front of a Tokenizer. */
export interface PromptTokenizer {
  readonly tokenizer: Tokenizer;
  tokenize(text: string, maxTokens: number): Promise<TokenizeResult>;
}
