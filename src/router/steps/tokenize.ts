// The tokenize step: the prompt's tokens through the segment-cached tokenizer, cut at max_prompt_tokens.
import { boundedDetail } from '../../core/bounded-detail.js';
import type { PromptTokenizer, TokenizeResult } from '../../tokenize/types.js';
import { ResourceLoadingError } from '../resource-load.js';
import { StepFallback } from './step-fallback.js';

/**
 * The tokenize step: the prompt's tokens through the segment-cached tokenizer, cut at `maxTokens`. A tokenizer
 * that fails to load or to run falls back (tokenizer_error), one still loading in the background too
 * (tokenizer_loading), with the prompt's size estimated from its text.
 */
export async function tokenizePrompt(
  tokenizer: () => PromptTokenizer,
  text: string,
  maxTokens: number,
): Promise<TokenizeResult | StepFallback> {
  try {
    return await tokenizer().tokenize(text, maxTokens);
  } catch (e) {
    const reason = e instanceof ResourceLoadingError ? 'tokenizer_loading' : 'tokenizer_error';
    return new StepFallback(reason, boundedDetail(e), Math.ceil(text.length / 4));
  }
}
