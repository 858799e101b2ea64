/**
 * Pure pieces of vLLM's OpenAI-compatible API (research/vllm.md §5): sampling parameters read from a body,
 * and the JSON shapes of responses, stream chunks, usage and errors, with vLLM's field order.
 */
import { isRecord } from '../../src/core/is-record.js';

export type Json = Record<string, unknown>;

export interface SamplingParams {
  /** null = until max_model_len (vLLM's default). */
  maxTokens: number | null;
  minTokens: number;
  ignoreEos: boolean;
  stream: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  /** prompt_logprobs requests skip reading the prefix cache. */
  skipPrefixCache: boolean;
  cacheSalt: string | null;
  /**
   * vLLM's per-request `vllm_xargs.kv_cache_report_mode` (default "incremental"). Only "full" changes anything:
   * prefix hits are re-announced as BlockStored (vllm/v1/core/kv_cache_manager.py).
   */
  kvCacheReportMode: string;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string; param: string | null };

function bad<T>(message: string, param: string | null = null): Parsed<T> {
  return { ok: false, message, param };
}

function optInt(body: Json, key: string, min: number): Parsed<number | null> {
  const v = body[key];
  if (v === undefined || v === null) return { ok: true, value: null };
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
    return bad(`${key} must be an integer ≥ ${min}, got ${JSON.stringify(v)}`, key);
  return { ok: true, value: v };
}

export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

const DEFAULT_KV_CACHE_REPORT_MODE = 'incremental';

/**
 * A `vllm_xargs` value pydantic accepts for `str | int | float`: booleans too, since lax mode coerces them to
 * 0/1 (lists take the same scalars, not nested lists or objects).
 */
function isXargScalar(v: unknown): boolean {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

/**
 * `vllm_xargs: dict[str, str | int | float | list[str | int | float]] | None` as pydantic validates it (a 400
 * otherwise), read into the report mode vllm/v1/request.py takes from `extra_args`.
 */
function parseKvCacheReportMode(body: Json): Parsed<string> {
  const x = body.vllm_xargs;
  if (x === undefined || x === null) return { ok: true, value: DEFAULT_KV_CACHE_REPORT_MODE };
  if (!isRecord(x)) return bad('vllm_xargs: Input should be a valid dictionary', 'vllm_xargs');
  for (const [k, v] of Object.entries(x))
    if (!isXargScalar(v) && !(Array.isArray(v) && v.every(isXargScalar)))
      return bad(
        `vllm_xargs.${k}: Input should be a valid string, number, or list of strings and numbers`,
        'vllm_xargs',
      );
  if (!Object.hasOwn(x, 'kv_cache_report_mode')) return { ok: true, value: DEFAULT_KV_CACHE_REPORT_MODE };
  const mode = x.kv_cache_report_mode;
  // vLLM does not validate the mode and compares it to "full" only. A non-string (a number, a list) can never
  // equal it, so keep its JSON text: String(["full"]) would read as "full".
  return { ok: true, value: typeof mode === 'string' ? mode : JSON.stringify(mode) };
}

/** Reads the sampling fields the emulator honours; others (temperature, top_p, seed, stop…) are accepted and ignored. */
export function parseSamplingParams(body: Json, chat: boolean): Parsed<SamplingParams> {
  const maxKeys = chat ? ['max_completion_tokens', 'max_tokens'] : ['max_tokens'];
  // CompletionRequest.max_tokens defaults to 16 (OpenAI's legacy default); an explicit null, and chat's
  // unset max_tokens, run to max_model_len.
  let maxTokens: number | null = !chat && !('max_tokens' in body) ? COMPLETIONS_DEFAULT_MAX_TOKENS : null;
  for (const k of maxKeys) {
    const r = optInt(body, k, 1);
    if (!r.ok) return r;
    if (r.value !== null) {
      maxTokens = r.value;
      break;
    }
  }
  const minTokens = optInt(body, 'min_tokens', 0);
  if (!minTokens.ok) return minTokens;
  // SamplingParams._verify_args, word for word (a ValueError, so a 400).
  if (maxTokens !== null && (minTokens.value ?? 0) > maxTokens)
    return bad(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens.value}.`);
  const n = optInt(body, 'n', 1);
  if (!n.ok) return n;
  if ((n.value ?? 1) !== 1) return bad('the vLLM emulator supports only n=1', 'n');
  const stream = body.stream === true;
  const so = body.stream_options;
  if (so !== undefined && so !== null && !isRecord(so))
    return bad('stream_options must be an object', 'stream_options');
  if (isRecord(so) && !stream)
    return bad('Stream options can only be defined when `stream=True`.', 'stream_options');
  // StreamOptions(include_usage=True, continuous_usage_stats=False): an empty object turns usage on.
  const includeUsage = isRecord(so) && so.include_usage !== false && so.include_usage !== null;
  const continuousUsage = includeUsage && isRecord(so) && so.continuous_usage_stats === true;
  const salt = body.cache_salt;
  if (
    salt !== undefined &&
    salt !== null &&
    (typeof salt !== 'string' || salt.length === 0 || salt.length > 1024)
  )
    return bad('cache_salt must be a non-empty string of at most 1024 characters', 'cache_salt');
  const pl = body.prompt_logprobs;
  const kvCacheReportMode = parseKvCacheReportMode(body);
  if (!kvCacheReportMode.ok) return kvCacheReportMode;
  return {
    ok: true,
    value: {
      maxTokens,
      minTokens: minTokens.value ?? 0,
      ignoreEos: body.ignore_eos === true,
      stream,
      includeUsage,
      continuousUsage,
      skipPrefixCache: pl !== undefined && pl !== null,
      cacheSalt: typeof salt === 'string' ? salt : null,
      kvCacheReportMode: kvCacheReportMode.value,
    },
  };
}

/** vLLM's completions `prompt`: a string, token ids, or a one-element list of either. */
export function parsePrompt(p: unknown): Parsed<string | number[]> {
  const isIds = (v: unknown): v is number[] =>
    Array.isArray(v) &&
    v.length > 0 &&
    v.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0);
  if (typeof p === 'string') return { ok: true, value: p };
  if (isIds(p)) return { ok: true, value: p };
  if (Array.isArray(p) && p.length === 1) {
    const only: unknown = p[0];
    if (typeof only === 'string') return { ok: true, value: only };
    if (isIds(only)) return { ok: true, value: only };
  }
  if (Array.isArray(p) && p.length > 1)
    return bad('the vLLM emulator serves one prompt per request', 'prompt');
  return bad('prompt must be a string or a list of token ids', 'prompt');
}

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

export type ErrorType =
  'BadRequestError' | 'NotFoundError' | 'InternalServerError' | 'ServiceUnavailableError';

/** vLLM's ErrorResponse: {"error": {"message", "type", "param", "code": <HTTP status>}}. */
export function errorJson(
  message: string,
  type: ErrorType,
  status: number,
  param: string | null = null,
): Json {
  return { error: { message, type, param, code: status } };
}

export function sse(data: Json | string): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}
