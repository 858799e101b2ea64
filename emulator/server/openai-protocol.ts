/**
 * Pure pieces of vLLM's OpenAI-compatible API (docs/emulator.md): the JSON shapes of responses, stream
 * chunks and usage, with vLLM's field order. Requests are read in vllm-request.ts, errors in vllm-errors.ts.
 */
import type { Json } from './vllm-errors.js';

export type { Json };

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

/**
 * UsageInfo(prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details). `details` is false for
 * continuous_usage_stats chunks: vLLM builds those without prompt_tokens_details, only the final usage has it.
 */
export function usageJson(u: Usage, details: boolean, nullDetails: boolean): Json {
  const out: Json = {
    prompt_tokens: u.promptTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    completion_tokens: u.completionTokens,
  };
  // vLLM: only with --enable-prompt-tokens-details and a non-zero hit.
  if (details && u.cachedTokens > 0) out.prompt_tokens_details = { cached_tokens: u.cachedTokens };
  else if (nullDetails) out.prompt_tokens_details = null;
  return out;
}

export interface ChunkHead {
  id: string;
  created: number;
  model: string;
}

export function chatRoleChunk(h: ChunkHead, usage: Json | null): Json {
  return chatChunk(h, { role: 'assistant', content: '' }, null, usage);
}

export function chatChunk(h: ChunkHead, delta: Json, finishReason: string | null, usage: Json | null): Json {
  const choice: Json = { index: 0, delta, logprobs: null, finish_reason: finishReason };
  if (finishReason !== null) choice.stop_reason = null;
  const out: Json = {
    id: h.id,
    object: 'chat.completion.chunk',
    created: h.created,
    model: h.model,
    choices: [choice],
  };
  if (usage !== null) out.usage = usage;
  return out;
}

export function completionChunk(
  h: ChunkHead,
  text: string,
  finishReason: string | null,
  usage: Json | null,
): Json {
  const out: Json = {
    id: h.id,
    object: 'text_completion',
    created: h.created,
    model: h.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null }],
  };
  if (usage !== null) out.usage = usage;
  return out;
}

/** The final usage-only chunk (choices empty), sent before [DONE]. */
export function usageChunk(h: ChunkHead, chat: boolean, usage: Json): Json {
  return {
    id: h.id,
    object: chat ? 'chat.completion.chunk' : 'text_completion',
    created: h.created,
    model: h.model,
    choices: [],
    usage,
  };
}

export function chatResponse(h: ChunkHead, text: string, finishReason: string, usage: Json): Json {
  return {
    id: h.id,
    object: 'chat.completion',
    created: h.created,
    model: h.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: [],
          reasoning_content: null,
        },
        logprobs: null,
        finish_reason: finishReason,
        stop_reason: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage,
    prompt_logprobs: null,
    kv_transfer_params: null,
  };
}

export function completionResponse(h: ChunkHead, text: string, finishReason: string, usage: Json): Json {
  return {
    id: h.id,
    object: 'text_completion',
    created: h.created,
    model: h.model,
    choices: [
      {
        index: 0,
        text,
        logprobs: null,
        finish_reason: finishReason,
        stop_reason: null,
        prompt_logprobs: null,
      },
    ],
    usage,
    kv_transfer_params: null,
  };
}

export function sse(data: Json | string): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}
