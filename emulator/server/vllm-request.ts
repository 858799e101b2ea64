/**
 * vLLM's request models for the fields the emulator reads, validated as pydantic does (v0.26.1rc1:
 * ChatCompletionRequest in vllm/entrypoints/openai/chat_completion/protocol.py, CompletionRequest in
 * …/completion/protocol.py): the `mode="before"` model validators first, in the order pydantic runs them
 * (the last defined runs first), stopping at the first that raises; then every field, in definition order,
 * collecting all errors. Fields the emulator ignores (sampling knobs, tool_choice, logprobs, …) are neither
 * validated nor checked by the validators that only look at them.
 */
import { isRecord } from '../../src/core/is-record.js';
import {
  any,
  bool,
  dict,
  float,
  int,
  list,
  model,
  nullable,
  str,
  union,
  type PyLookup,
  type Validator,
} from './pydantic-lax.js';
import { pyAt, pyStr, pyTypeName, type PyValue } from './py-json.js';
import {
  badRequest,
  requestValidationError,
  validatorError,
  type ApiError,
  type Json,
  type LineError,
} from './vllm-errors.js';

/** One prompt of a /v1/completions request: text or token ids. */
export type CompletionPrompt = { text: string } | { ids: number[] };

export interface GenerationRequest {
  chat: boolean;
  /** null and "" both mean the base model. */
  model: string | null;
  stream: boolean;
  /** should_include_usage: stream_options.include_usage (default false since vLLM #36379). */
  includeUsage: boolean;
  continuousUsage: boolean;
  /** The output cap the renderer checks (chat: max_completion_tokens, else max_tokens); null when unset. */
  maxTokens: bigint | null;
  /** Which field `maxTokens` came from, as vLLM names it in errors. */
  maxTokensParam: 'max_tokens' | 'max_completion_tokens';
  minTokens: bigint;
  ignoreEos: boolean;
  n: bigint;
  cacheSalt: string | null;
  /** prompt_logprobs set: vLLM skips reading the prefix cache. */
  skipPrefixCache: boolean;
  /** vllm_xargs.kv_cache_report_mode (default "incremental"; only "full" does anything). */
  kvCacheReportMode: string;
  /** Chat: the body with the booleans the chat parser reads set to what pydantic made of them. */
  chatBody: Json | null;
  /** Completions: the prompts (`prompt` as its union member reads), or null for prompt_embeds only. */
  prompts: CompletionPrompt[] | null;
}

export type Validated = { ok: true; value: GenerationRequest } | { ok: false; error: ApiError };

const DEFAULT_KV_CACHE_REPORT_MODE = 'incremental';
/** CompletionRequest.max_tokens' default, which normalize_null_max_tokens also gives an explicit null. */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16n;
/** envs.VLLM_MAX_COMPLETION_PROMPTS' default. */
const MAX_COMPLETION_PROMPTS = 1024;

/** Python's truth value of a decoded JSON value. */
function truthy(v: unknown): boolean {
  if (v === undefined || v === null || v === false) return false;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'string' || Array.isArray(v)) return v.length > 0;
  if (isRecord(v)) return Object.keys(v).length > 0;
  return true;
}

const streamOptions = nullable(
  model({ include_usage: nullable(bool), continuous_usage_stats: nullable(bool) }),
);
// `str | int | float | list[str | int | float]` is one union of four members (typing flattens it).
const xargScalar = union<string | bigint | number>(str, int(), float);
const vllmXargs = nullable(dict(union<unknown>(str, int(), float, list(xargScalar))));
const tokenIds = list(int(0));
const promptUnion = nullable(union<unknown>(tokenIds, list(tokenIds), str, list(str)));

interface Field {
  name: string;
  validator: Validator<unknown>;
  required?: boolean;
}

const f = (name: string, validator: Validator<unknown>, required = false): Field => ({
  name,
  validator,
  required,
});

// ChatCompletionRequest's fields that the emulator reads, in definition order.
const CHAT_FIELDS: readonly Field[] = [
  f('messages', list(any), true),
  f('model', nullable(str)),
  f('max_tokens', nullable(int())),
  f('max_completion_tokens', nullable(int())),
  f('n', nullable(int())),
  f('stream', nullable(bool)),
  f('stream_options', streamOptions),
  f('tools', nullable(list(any))),
  f('ignore_eos', bool),
  f('min_tokens', int()),
  f('prompt_logprobs', nullable(int())),
  f('add_generation_prompt', bool),
  f('continue_final_message', bool),
  f('chat_template_kwargs', nullable(dict(any))),
  f('cache_salt', nullable(str)),
  f('vllm_xargs', vllmXargs),
];

// CompletionRequest's, likewise.
const COMPLETION_FIELDS: readonly Field[] = [
  f('model', nullable(str)),
  f('prompt', promptUnion),
  f('max_tokens', nullable(int())),
  f('n', int()),
  f('stream', nullable(bool)),
  f('stream_options', streamOptions),
  f('ignore_eos', bool),
  f('min_tokens', int()),
  f('prompt_logprobs', nullable(int())),
  f('cache_salt', nullable(str)),
  f('vllm_xargs', vllmXargs),
];

/** The body's fields as validated; the errors of all that fail. */
function validateFields(
  body: Json,
  fields: readonly Field[],
  withToolChoice: boolean,
  py: PyLookup,
): { values: Map<string, unknown>; errors: LineError[] } {
  const values = new Map<string, unknown>();
  const errors: LineError[] = [];
  for (const { name, validator, required } of fields) {
    if (!Object.hasOwn(body, name)) {
      if (required === true)
        errors.push({
          type: 'missing',
          loc: [name],
          msg: 'Field required',
          input: { at: [], withToolChoice },
        });
      continue;
    }
    const r = validator.check(body[name], [name], py);
    if (r.ok) values.set(name, r.value);
    else errors.push(...r.errors.map((e) => ({ ...e, loc: [name, ...e.loc] })));
  }
  return { values, errors };
}

/** Reads a value of the body as Python holds it (for str() in a message). */
type PyAt = (key: string) => PyValue;

// --- model validators (each returns the error it raises, or null) -------------------------------------

function cacheSaltCheck(body: Json): LineError | null {
  const salt = body.cache_salt;
  if (salt !== undefined && salt !== null && (typeof salt !== 'string' || salt.length === 0))
    return validatorError("Parameter 'cache_salt' must be a non-empty string if provided.", 'cache_salt');
  return null;
}

function streamOptionsCheck(body: Json): LineError | null {
  // Only a truthy stream_options: `{}` (or null, false, "") is not an error, whatever `stream` is.
  if (truthy(body.stream_options) && !truthy(body.stream))
    return validatorError('Stream options can only be defined when `stream=True`.', 'stream_options');
  return null;
}

/** check_logprobs' checks of prompt_logprobs (its checks of logprobs fields the emulator ignores are left out). */
function promptLogprobsCheck(body: Json, py: PyAt): LineError | null {
  const pl = body.prompt_logprobs;
  if (pl === undefined || pl === null) return null;
  if (typeof pl !== 'number' && typeof pl !== 'boolean')
    return validatorError(
      '`prompt_logprobs` must be an integer.',
      'prompt_logprobs',
      pyStr(py('prompt_logprobs')),
    );
  const x = Number(pl);
  if (truthy(body.stream) && (x > 0 || x === -1))
    return validatorError('`prompt_logprobs` are not available when `stream=True`.', 'prompt_logprobs');
  if (x < 0 && x !== -1)
    return validatorError(
      '`prompt_logprobs` must be a positive value or -1.',
      'prompt_logprobs',
      pyStr(py('prompt_logprobs')),
    );
  return null;
}

function beforeChat(body: Json, py: PyAt): { error: LineError | ApiError | null; withToolChoice: boolean } {
  // check_system_message_content_type iterates `messages`: a number, a bool or null is a TypeError (a 400).
  const messages = body.messages;
  if (
    Object.hasOwn(body, 'messages') &&
    (messages === null || typeof messages === 'number' || typeof messages === 'boolean')
  )
    return { error: badRequest(`'${pyTypeName(messages)}' object is not iterable`), withToolChoice: false };
  let error = cacheSaltCheck(body);
  if (error) return { error, withToolChoice: false };
  if (truthy(body.continue_final_message) && truthy(body.add_generation_prompt))
    return {
      error: validatorError(
        'Cannot set both `continue_final_message` and `add_generation_prompt` to True.',
        null,
      ),
      withToolChoice: false,
    };
  // check_tool_usage (its tool_choice checks look at a field the emulator ignores).
  if (Array.isArray(body.tools) && body.tools.length === 0)
    return {
      error: validatorError(
        '`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.',
        'tools',
      ),
      withToolChoice: false,
    };
  // …which also sets tool_choice "auto" in the body when tools are given without one.
  const withToolChoice = !Object.hasOwn(body, 'tool_choice') && truthy(body.tools);
  error = promptLogprobsCheck(body, py) ?? streamOptionsCheck(body);
  if (error) return { error: { ...error, input: { at: [], withToolChoice } }, withToolChoice };
  return { error: null, withToolChoice };
}

function beforeCompletion(body: Json, py: PyAt): LineError | null {
  const error = cacheSaltCheck(body);
  if (error) return error;
  const prompt = body.prompt;
  // is_list_of(prompt, int) looks at the first item only (a bool is an int too).
  const first: unknown = Array.isArray(prompt) ? prompt[0] : undefined;
  const firstIsInt = typeof first === 'boolean' || Number.isInteger(first);
  if (Array.isArray(prompt) && prompt.length > MAX_COMPLETION_PROMPTS && !firstIsInt)
    return validatorError(
      `prompt list length ${prompt.length} exceeds the maximum allowed count of ${MAX_COMPLETION_PROMPTS}. ` +
        'To increase this limit, set the VLLM_MAX_COMPLETION_PROMPTS environment variable.',
      'prompt',
    );
  const embeds = body.prompt_embeds;
  if (Array.isArray(embeds) && embeds.length > MAX_COMPLETION_PROMPTS)
    return validatorError(
      `prompt_embeds list length ${embeds.length} exceeds the maximum allowed count of ${MAX_COMPLETION_PROMPTS}. ` +
        'To increase this limit, set the VLLM_MAX_COMPLETION_PROMPTS environment variable.',
      'prompt_embeds',
    );
  const promptEmpty = prompt === undefined || prompt === null || prompt === '';
  const embedsEmpty =
    embeds === undefined || embeds === null || (Array.isArray(embeds) && embeds.length === 0);
  if (promptEmpty && embedsEmpty)
    return validatorError('Either prompt or prompt_embeds must be provided and non-empty.', 'prompt');
  return streamOptionsCheck(body) ?? promptLogprobsCheck(body, py);
}

function kvCacheReportMode(xargs: unknown): string {
  if (!isRecord(xargs) || !Object.hasOwn(xargs, 'kv_cache_report_mode')) return DEFAULT_KV_CACHE_REPORT_MODE;
  const mode = xargs.kv_cache_report_mode;
  // vLLM compares the mode to "full" only; a non-string (a number, a list) never equals it, so keep its
  // JSON text: String(["full"]) would read as "full".
  return typeof mode === 'string' ? mode : JSON.stringify(mode);
}

function completionPrompts(v: unknown): CompletionPrompt[] | null {
  if (v === null || v === undefined) return null;
  const { member, value } = v as { member: number; value: unknown };
  const ids = (xs: bigint[]): number[] => xs.map(Number);
  switch (member) {
    case 0:
      // prompt_to_seq: a non-empty list of ints is one prompt; [] is none.
      return (value as bigint[]).length > 0 ? [{ ids: ids(value as bigint[]) }] : [];
    case 1:
      return (value as bigint[][]).map((x) => ({ ids: ids(x) }));
    case 2:
      return [{ text: value as string }];
    default:
      return (value as string[]).map((text) => ({ text }));
  }
}

/**
 * Validates a /v1/chat/completions or /v1/completions body (a JSON object) as vLLM's request model does.
 * `py` gives the body as Python decoded it, for the texts of validation errors.
 */
export function validateGenerationRequest(body: Json, chat: boolean, py: () => PyValue): Validated {
  let tree: PyValue | undefined;
  const root = (): PyValue => (tree ??= py());
  const at: PyAt = (key) => (root() as Map<string, PyValue>).get(key) ?? null;
  let withToolChoice = false;
  if (chat) {
    const b = beforeChat(body, at);
    if (b.error !== null)
      return { ok: false, error: 'status' in b.error ? b.error : requestValidationError([b.error], root) };
    withToolChoice = b.withToolChoice;
  } else {
    const e = beforeCompletion(body, at);
    if (e) return { ok: false, error: requestValidationError([e], root) };
  }
  const { values, errors } = validateFields(
    body,
    chat ? CHAT_FIELDS : COMPLETION_FIELDS,
    withToolChoice,
    (p) => pyAt(root(), p),
  );
  if (errors.length > 0) return { ok: false, error: requestValidationError(errors, root) };

  const get = <T>(k: string): T | undefined => values.get(k) as T | undefined;
  const so = get<{ include_usage?: boolean | null; continuous_usage_stats?: boolean | null } | null>(
    'stream_options',
  );
  const includeUsage = so?.include_usage === true;
  let maxTokens: bigint | null;
  let maxTokensParam: GenerationRequest['maxTokensParam'] = 'max_tokens';
  if (chat) {
    const mct = get<bigint | null>('max_completion_tokens') ?? null;
    if (mct !== null) {
      maxTokens = mct;
      maxTokensParam = 'max_completion_tokens';
    } else maxTokens = get<bigint | null>('max_tokens') ?? null;
  } else maxTokens = get<bigint | null>('max_tokens') ?? COMPLETIONS_DEFAULT_MAX_TOKENS;
  let chatBody: Json | null = null;
  if (chat) {
    chatBody = { ...body };
    for (const k of ['add_generation_prompt', 'continue_final_message'])
      if (values.has(k)) chatBody[k] = values.get(k);
  }
  return {
    ok: true,
    value: {
      chat,
      model: get<string | null>('model') ?? null,
      stream: get<boolean | null>('stream') === true,
      includeUsage,
      continuousUsage: includeUsage && so?.continuous_usage_stats === true,
      maxTokens,
      maxTokensParam,
      minTokens: get<bigint>('min_tokens') ?? 0n,
      ignoreEos: get<boolean>('ignore_eos') === true,
      n: get<bigint | null>('n') ?? 1n,
      cacheSalt: get<string | null>('cache_salt') ?? null,
      skipPrefixCache: (get<bigint | null>('prompt_logprobs') ?? null) !== null,
      kvCacheReportMode: kvCacheReportMode(body.vllm_xargs),
      chatBody,
      prompts: chat ? null : completionPrompts(values.get('prompt')),
    },
  };
}
