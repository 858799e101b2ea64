// src/tokenize's public surface: tokenizer and template loaders, prompt tokenizer, segment cache.
export type { ChatTemplate, PromptTokenizer, SpecialTokenFlags, TokenizeResult, Tokenizer } from './types.js';
export { loadTokenizer } from './load-tokenizer.js';
export { loadChatTemplate } from './load-chat-template.js';
export {
  createPromptTokenizer,
  safeCut,
  CHARS_PER_TOKEN_BUDGET,
  PROMPT_MEMO_BYTES,
  PROMPT_MEMO_MIN_CHARS,
  type CachedPromptTokenizer,
  type PromptTokenizerOptions,
} from './prompt-tokenizer.js';
export { SegmentCache, segmentKey, type SegmentCacheStats } from './segment-cache.js';
export { createSpecialSplitter, type SpecialSplitter } from './special-splitter.js';
export { createTiktokenTokenizer, HARMONY_SPECIAL_TOKENS, TIKTOKEN_ENCODINGS } from './tiktoken-tokenizer.js';
export { createHfTokenizer, isStartSensitive } from './hf-tokenizer.js';
export { createChatmlTemplate } from './chat-template/chatml.js';
export { createHarmonyTemplate } from './chat-template/harmony.js';
export { createLlama3Template } from './chat-template/llama3.js';
export { createNoneTemplate } from './chat-template/none.js';
export { createHfTemplate, detectContentFormat, TemplateRaisedError } from './chat-template/hf-jinja.js';
export { strftime } from './chat-template/strftime.js';
export { compareTokens, type TokenComparison } from './compare-tokens.js';
export { renderMemoized, RENDER_MEMO_BYTES } from './render-memo.js';
