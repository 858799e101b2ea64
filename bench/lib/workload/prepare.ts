// A turn ready for the wire: GuideLLM's chat body and the prompt ids vLLM would compute.
import type { ChatRequest } from '../../../src/core/request.js';
import type { ChatTemplate, PromptTokenizer } from '../../../src/tokenize/types.js';
import type { Turn } from './client.js';

/** A turn ready for the wire: the OpenAI body GuideLLM would send and the prompt ids vLLM would compute. */
export interface PreparedRequest {
  turn: Turn;
  body: string;
  promptTokenIds: number[];
  maxTokens: number;
  firstMessageText: string;
}

/** The OpenAI chat body GuideLLM sends for a turn (output_tokens set: max_tokens, ignore_eos, usage). */
export function chatBody(t: Turn, model: string): string {
  return JSON.stringify({
    model,
    messages: t.messages,
    max_tokens: t.conv.outputTokens,
    ignore_eos: true,
    stop: null,
    stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true },
  });
}

/**
 * GuideLLM's request body with output_tokens set (bench.md §1.5): max_tokens=N, ignore_eos, stream with
 * usage. Prompt ids come from the same chat template and tokenizer the pods use (vLLM renders and
 * tokenizes the body; the emulator engine takes ids).
 */
export async function prepareRequest(
  t: Turn,
  model: string,
  template: ChatTemplate,
  tokenizer: PromptTokenizer,
): Promise<PreparedRequest> {
  const maxTokens = t.conv.outputTokens;
  const body = chatBody(t, model);
  const chat: ChatRequest = {
    model,
    messages: t.messages,
    addGenerationPrompt: true,
    continueFinalMessage: false,
    stream: true,
  };
  const { tokens } = await tokenizer.tokenize(template.render(chat), 1 << 22);
  return {
    turn: t,
    body,
    promptTokenIds: [...tokens],
    maxTokens,
    firstMessageText: t.messages[0]?.content ?? '',
  };
}
