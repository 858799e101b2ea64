// Parses a chat-completions body as vLLM validates it: the messages, tools and options its template renders.
import { createHash } from 'node:crypto';
import { mayHavePythonNumbers, parsePythonJson } from './python-json.js';
import type { FallbackReason } from './fallback.js';
import { isRecord } from './is-record.js';

/**
 * One content part vLLM renders as text. `from` is the part's type as sent when it is not `text`: the Jinja
 * path renders them all alike, but gpt-oss's harmony path reads only a part's `text` key (harmony.ts).
 */
export interface TextPart {
  type: 'text';
  text: string;
  from?: 'input_text' | 'output_text' | 'refusal' | 'thinking' | 'string';
}

/**
 * A `tool_reference` part (chat_utils `CustomChatCompletionContentToolReferenceParam`): a deferred tool's name,
 * null when absent. The "string" format renders the name as text, the "openai" format passes the part on.
 */
export interface ToolReferencePart {
  type: 'tool_reference';
  name: string | null;
}

export type ContentPart = TextPart | ToolReferencePart;

/** A chat message after validation: content is text only (string or text parts joined by the template). */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | 'function';
  /** String content, or its text and tool-reference parts (templates decide how parts join). */
  content: string | ContentPart[] | null;
  name?: string;
  tool_calls?: unknown[];
  /** null is kept: vLLM's own message type allows it, and the template sees None. */
  tool_call_id?: string | null;
  /** An assistant message's reasoning: `reasoning`, else the deprecated `reasoning_content` (see below). */
  reasoning?: string;
  /** A model-specific task marker vLLM passes through (DeepSeek V4). */
  task?: string;
  /** A developer message's tools, as vLLM hands them to the template (`developerTools`). */
  tools?: unknown;
}

export interface ChatRequest {
  /** The model name the client asked for (a base model or a LoRA adapter name). */
  model: string;
  messages: ChatMessage[];
  tools?: unknown[];
  cacheSalt?: string;
  chatTemplateKwargs?: Record<string, unknown>;
  /**
   * `reasoning_effort`: vLLM renders it into gpt-oss's harmony system message, and hands it to a Jinja template
   * with `enable_thinking` = (effort != "none") unless chat_template_kwargs sets that.
   */
  reasoningEffort?: string;
  /** `documents` (RAG templates such as Command R): handed to the template as sent. */
  documents?: unknown[];
  addGenerationPrompt: boolean;
  continueFinalMessage: boolean;
  stream: boolean;
  /** max_completion_tokens, else max_tokens, when a positive integer: the most tokens the answer may have. */
  maxTokens?: number;
  /** The body has its own `vllm_xargs` (even null): the plugin leaves such a body as it is. */
  hasVllmXargs?: boolean;
  /** OpenAI's `user` field (an end-user id), when a non-empty string. */
  user?: string;
}

export type ParseResult =
  { ok: true; request: ChatRequest } | { ok: false; reason: FallbackReason; detail: string; model?: string };

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/**
 * Media part types vLLM accepts (chat_utils MM_PARSER_MAP), plus OpenAI's `file`. `prompt_embeds` too: vLLM
 * splices the client's embeddings in at a placeholder token, so the KV of those positions is not the tokens'.
 */
const MEDIA_PARTS = new Set([
  'image_url',
  'input_image',
  'image_pil',
  'image_embeds',
  'audio_url',
  'input_audio',
  'audio_embeds',
  'video_url',
  'video_embeds',
  'prompt_embeds',
  'file',
]);

/**
 * Part types vLLM renders as text, and the key holding the text (chat_utils `MM_PARSER_MAP`).
 * `_parse_chat_message_content_part` makes each a plain string, joined with "\n" by
 * `_parse_chat_message_content_parts` for "string"-format templates, or `{type: "text", text}` for
 * "openai"-format ones. A `thinking` part stays text (`closed` is ignored): vLLM does not move it to the
 * message's reasoning.
 */
const TEXT_PARTS = new Map<string, 'text' | 'refusal' | 'thinking'>([
  ['text', 'text'],
  ['input_text', 'text'],
  ['output_text', 'text'],
  ['refusal', 'refusal'],
  ['thinking', 'thinking'],
]);

/**
 * The text part types vLLM's request model declares (`ChatCompletionContentPartParam` in chat_utils). pydantic
 * types a message as vLLM's own message dict, whose parts reach the parser as sent, only when at least one
 * part matches one of them; otherwise it takes OpenAI's message type, whose parts it checks lazily against
 * OpenAI's part types when the parser reads them, so an `input_text`, `output_text`, bare string or textless
 * part fails the request. OpenAI's `function` message has no list content, so its parts always pass.
 */
const DECLARED_TEXT_PARTS = new Set(['text', 'refusal', 'thinking']);
// `tool_reference` is declared too (`CustomChatCompletionContentToolReferenceParam` is in that union); textParts
// handles it apart since it is not text.
const MAX_MESSAGES = 100_000;

function fail(reason: FallbackReason, detail: string, model?: string): ParseResult {
  return model === undefined ? { ok: false, reason, detail } : { ok: false, reason, detail, model };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Bodies at least this large get a digest (bodyDigest), for the whole-prompt render memo. */
export const BODY_DIGEST_MIN_BYTES = 65_536;
const digests = new WeakMap<ChatRequest, string>();

/**
 * SHA-1 of the body a long request was parsed from (null for short bodies and hand-made requests): equal
 * digests mean equal requests, so the same long body again can reuse its rendered prompt.
 */
export function bodyDigest(request: ChatRequest): string | null {
  return digests.get(request) ?? null;
}

/** Decodes raw body bytes; invalid UTF-8 and non-JSON are reasons, never exceptions. */
export function parseChatBody(
  body: Uint8Array | string,
  maxBodyBytes = Number.POSITIVE_INFINITY,
): ParseResult {
  const size = typeof body === 'string' ? body.length : body.byteLength;
  if (size > maxBodyBytes)
    return fail('body_too_large', `body is ${size} bytes, over max_body_bytes ${maxBodyBytes}`);
  let text: string;
  if (typeof body === 'string') text = body;
  else {
    try {
      text = utf8.decode(body);
    } catch {
      return fail('invalid_utf8', 'body is not valid UTF-8');
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the body: keep prompt text out of spans and logs.
    return fail('body_not_json', 'body is not JSON');
  }
  const parsed = parseChatRequest(withPythonNumbers(json, text));
  if (parsed.ok && size >= BODY_DIGEST_MIN_BYTES)
    digests.set(parsed.request, createHash('sha1').update(body).digest('base64'));
  return parsed;
}

/**
 * The tools and tool calls as vLLM's json.loads reads their numbers (python-json.ts): the template prints
 * them, so `1.0` must stay `1.0`. Only those parts, and only when the body may hold such a number.
 */
export function withPythonNumbers(json: unknown, text: string): unknown {
  if (!isRecord(json)) return json;
  const messages = Array.isArray(json.messages) ? (json.messages as unknown[]) : [];
  // A developer message's tools are printed too (vllm-conversation.ts).
  const perMessage = (m: unknown): boolean =>
    isRecord(m) && (Array.isArray(m.tool_calls) || (m.role === 'developer' && Array.isArray(m.tools)));
  const calls = messages.some(perMessage);
  const tools = Array.isArray(json.tools) && json.tools.length > 0;
  if ((!calls && !tools) || !mayHavePythonNumbers(text)) return json;
  // `text` parsed already, so this cannot throw.
  const py = parsePythonJson(text);
  if (!isRecord(py)) return json;
  const pyMessages = Array.isArray(py.messages) ? (py.messages as unknown[]) : [];
  return {
    ...json,
    ...(tools ? { tools: py.tools } : {}),
    messages: messages.map((m, i) => {
      const p = pyMessages[i];
      if (!perMessage(m) || !isRecord(m) || !isRecord(p)) return m;
      return {
        ...m,
        ...(Array.isArray(m.tool_calls) ? { tool_calls: p.tool_calls } : {}),
        ...(m.role === 'developer' && Array.isArray(m.tools) ? { tools: p.tools } : {}),
      };
    }),
  };
}

/**
 * A tool reference's name as `MM_PARSER_MAP` reads it (`.get("name")`): null when absent or null. Any other
 * non-string pydantic would reject or coerce, so we do not guess.
 */
function toolReferenceName(
  p: Record<string, unknown>,
  here: string,
): { name: string | null } | { reason: FallbackReason; detail: string } {
  if (p.name === undefined || p.name === null) return { name: null };
  if (typeof p.name === 'string') return { name: p.name };
  return { reason: 'body_not_chat', detail: `${here} is a tool_reference whose name is not a string` };
}

/** A message's list content as the text and tool-reference parts vLLM renders, or why it cannot be predicted. */
function textParts(
  content: unknown[],
  role: string,
  at: string,
): { parts: ContentPart[] } | { reason: FallbackReason; detail: string } {
  const parts: ContentPart[] = [];
  let declared = role === 'function';
  // The first part that passes only beside a declared one (DECLARED_TEXT_PARTS).
  let needsDeclared: string | undefined;
  for (let j = 0; j < content.length; j++) {
    const p: unknown = content[j];
    const here = `${at}[${j}]`;
    if (typeof p === 'string') {
      // `_parse_chat_message_content_part` takes a bare string part as text.
      parts.push({ type: 'text', text: p, from: 'string' });
      needsDeclared ??= `${here} is a bare string`;
      continue;
    }
    if (!isRecord(p)) return { reason: 'body_not_chat', detail: `${here} is not an object` };
    if (typeof p.type !== 'string') {
      // vLLM infers a media part's type from its key (`{"image_url": …}`).
      const media = Object.keys(p).find((k) => MEDIA_PARTS.has(k));
      if (media !== undefined) return { reason: 'multimodal_content', detail: `${here} is ${media}` };
      // …and reads one with a `tool_reference` key as a tool reference named by its `name`. Only OpenAI's
      // part types require a type, so it passes only beside a declared part.
      if ('tool_reference' in p) {
        const ref = toolReferenceName(p, here);
        if ('reason' in ref) return ref;
        parts.push({ type: 'tool_reference', name: ref.name });
        needsDeclared ??= `${here} has no type`;
        continue;
      }
      return { reason: 'body_not_chat', detail: `${here} has no type` };
    }
    const key = TEXT_PARTS.get(p.type);
    if (key === undefined && p.type !== 'tool_reference') {
      // vLLM mixes multimodal hashes into block keys; we cannot predict them, so route on load.
      if (MEDIA_PARTS.has(p.type)) return { reason: 'multimodal_content', detail: `${here} is ${p.type}` };
      return { reason: 'body_not_chat', detail: `${here}.type ${p.type.slice(0, 40)} is unknown` };
    }
    if (p.uuid !== undefined && p.uuid !== null) {
      // `_parse_chat_message_content_mm_part` reads a part with a uuid as media found by its key, or as a
      // tool reference when it has a `tool_reference` key (the type alone is not enough), and rejects the rest.
      const media = Object.keys(p).find((k) => MEDIA_PARTS.has(k));
      if (media !== undefined) return { reason: 'multimodal_content', detail: `${here} is ${media}` };
      if (!('tool_reference' in p))
        return { reason: 'body_not_chat', detail: `${here} is ${p.type} with a uuid, which vLLM rejects` };
      const ref = toolReferenceName(p, here);
      if ('reason' in ref) return ref;
      parts.push({ type: 'tool_reference', name: ref.name });
      if (DECLARED_TEXT_PARTS.has(p.type) || p.type === 'tool_reference') declared = true;
      else needsDeclared ??= `${here} is ${p.type}`;
      continue;
    }
    if (key === undefined) {
      // A tool reference (`MM_PARSER_MAP` reads its `name`). vLLM declares its part type with `name: str`
      // (total=False): a missing name matches it, a null one does not, so that part passes only beside a
      // declared one, as a text part without its text does.
      const ref = toolReferenceName(p, here);
      if ('reason' in ref) return ref;
      parts.push({ type: 'tool_reference', name: ref.name });
      if (p.name === null) needsDeclared ??= `${here} is a tool_reference with a null name`;
      else declared = true;
      continue;
    }
    const value = p[key];
    if (typeof value === 'string') {
      // pydantic's lax bool decides whether such a `closed` passes; do not guess.
      if (p.type === 'thinking' && p.closed !== undefined && typeof p.closed !== 'boolean')
        return { reason: 'body_not_chat', detail: `${here}.closed must be a boolean` };
      parts.push(
        p.type === 'text'
          ? { type: 'text', text: value }
          : { type: 'text', text: value, from: p.type as NonNullable<TextPart['from']> },
      );
      if (DECLARED_TEXT_PARTS.has(p.type)) declared = true;
      else needsDeclared ??= `${here} is ${p.type}`;
    } else if ((value === undefined || value === null) && (p.type === 'text' || p.type === 'refusal')) {
      // vLLM skips a text or refusal part without its text (PART_TYPES_TO_SKIP_NONE_CONTENT).
      needsDeclared ??= `${here} has no ${key}`;
    } else
      // Any other part without its string: "string" format fails or drops it, "openai" format renders it.
      return { reason: 'body_not_chat', detail: `${here}.${key} must be a string` };
  }
  if (!declared && needsDeclared !== undefined)
    return {
      reason: 'body_not_chat',
      detail: `${needsDeclared}: vLLM rejects it unless the message has a text, refusal, thinking or tool_reference part`,
    };
  return { parts };
}

/**
 * A developer message's `tools` as vLLM passes them on (`_parse_chat_message_content` reads the validated
 * message's `tools`). When every tool is a valid ChatCompletionFunctionToolParam, pydantic types the message as
 * vLLM's CustomChatCompletionMessageParam and rebuilds each tool in its declared key order (`function` with
 * name, description, parameters, strict; then `type`; extra keys after, as the request model allows extras);
 * otherwise it falls back to OpenAI's developer message, which keeps `tools` as an unchecked extra, as sent.
 */
function developerTools(
  tools: unknown,
  at: string,
): { tools: unknown } | { reason: FallbackReason; detail: string } {
  if (!Array.isArray(tools)) return { tools };
  const out: unknown[] = [];
  for (let j = 0; j < tools.length; j++) {
    const t: unknown = tools[j];
    if (!isRecord(t) || t.type !== 'function' || !isRecord(t.function)) return { tools };
    const { name, description, parameters, strict, ...fnExtra } = t.function;
    if (typeof name !== 'string') return { tools };
    if (description !== undefined && typeof description !== 'string') return { tools };
    if (parameters !== undefined && !isRecord(parameters)) return { tools };
    // pydantic's lax bool decides whether such a `strict` passes, and what it becomes; do not guess.
    if (strict !== undefined && strict !== null && typeof strict !== 'boolean')
      return { reason: 'body_not_chat', detail: `${at}[${j}].function.strict must be a boolean` };
    const { type, function: _fn, ...extra } = t;
    out.push({
      function: {
        name,
        ...(description === undefined ? {} : { description }),
        ...(parameters === undefined ? {} : { parameters }),
        ...(strict === undefined ? {} : { strict }),
        ...fnExtra,
      },
      type,
      ...extra,
    });
  }
  return { tools: out };
}

export interface ParseChatOptions {
  /**
   * Accept an empty `messages` list, as vLLM's request model does (the chat template then decides). The
   * router refuses one (there is no prompt to route on); the emulator accepts it.
   */
  allowEmptyMessages?: boolean;
}

/** Validates an OpenAI chat-completions body. Never throws. */
export function parseChatRequest(json: unknown, options: ParseChatOptions = {}): ParseResult {
  if (!isRecord(json)) return fail('body_not_chat', 'body is not a JSON object');
  const model = json.model;
  if (typeof model !== 'string' || model.length === 0)
    return fail('body_not_chat', '`model` must be a non-empty string');
  const messages = json.messages;
  if (!Array.isArray(messages)) return fail('body_not_chat', '`messages` must be an array', model);
  if (messages.length === 0 && options.allowEmptyMessages !== true)
    return fail('body_not_chat', '`messages` is empty', model);
  if (messages.length > MAX_MESSAGES)
    return fail('body_not_chat', `more than ${MAX_MESSAGES} messages`, model);
  const out: ChatMessage[] = new Array(messages.length);
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isRecord(m)) return fail('body_not_chat', `messages[${i}] is not an object`, model);
    const role = m.role;
    if (typeof role !== 'string' || !ROLES.has(role))
      return fail(
        'body_not_chat',
        `messages[${i}].role ${JSON.stringify(role)?.slice(0, 40)} is not a chat role`,
        model,
      );
    const content = m.content;
    let parsed: ChatMessage['content'];
    if (content === undefined || content === null) parsed = null;
    else if (typeof content === 'string') parsed = content;
    else if (Array.isArray(content)) {
      const parts = textParts(content, role, `messages[${i}].content`);
      if ('reason' in parts) return fail(parts.reason, parts.detail, model);
      parsed = parts.parts;
    } else return fail('body_not_chat', `messages[${i}].content must be a string, an array or null`, model);
    const msg: ChatMessage = { role: role as ChatMessage['role'], content: parsed };
    if (typeof m.name === 'string') msg.name = m.name;
    if (Array.isArray(m.tool_calls)) msg.tool_calls = m.tool_calls;
    if (typeof m.tool_call_id === 'string' || m.tool_call_id === null) msg.tool_call_id = m.tool_call_id;
    if (role === 'assistant') {
      // ChatCompletionRequest._normalize_messages_before renames the deprecated `reasoning_content` to
      // `reasoning` unless `reasoning` is set (not null), and `_parse_chat_message_content` reads only
      // `reasoning`, only for assistant messages. (The rename came with vLLM PR #42664, May 2026; before it, from
      // #33402 on, a request's `reasoning_content` reached no template.)
      const reasoning = m.reasoning ?? m.reasoning_content;
      if (typeof reasoning === 'string') msg.reasoning = reasoning;
      else if (reasoning !== undefined && reasoning !== null)
        // vLLM hands any other value to the template as is; how Jinja prints it is not ours to guess.
        return fail('body_not_chat', `messages[${i}].reasoning must be a string`, model);
    }
    if (typeof m.task === 'string') msg.task = m.task;
    if (role === 'developer' && m.tools !== undefined && m.tools !== null) {
      const tools = developerTools(m.tools, `messages[${i}].tools`);
      if ('reason' in tools) return fail(tools.reason, tools.detail, model);
      msg.tools = tools.tools;
    }
    out[i] = msg;
  }
  const req: ChatRequest = {
    model,
    messages: out,
    addGenerationPrompt: json.add_generation_prompt !== false,
    continueFinalMessage: json.continue_final_message === true,
    stream: json.stream === true,
  };
  if (json.tools !== undefined && json.tools !== null) {
    if (!Array.isArray(json.tools)) return fail('body_not_chat', '`tools` must be an array', model);
    req.tools = json.tools;
  }
  if (json.cache_salt !== undefined && json.cache_salt !== null) {
    if (typeof json.cache_salt !== 'string' || json.cache_salt.length === 0)
      return fail('body_not_chat', '`cache_salt` must be a non-empty string', model);
    req.cacheSalt = json.cache_salt;
  }
  if (isRecord(json.chat_template_kwargs)) req.chatTemplateKwargs = json.chat_template_kwargs;
  if (Object.hasOwn(json, 'vllm_xargs')) req.hasVllmXargs = true;
  if (typeof json.reasoning_effort === 'string') req.reasoningEffort = json.reasoning_effort;
  if (Array.isArray(json.documents)) req.documents = json.documents;
  // A malformed limit is vLLM's to reject; routing just does without it.
  const limit = [json.max_completion_tokens, json.max_tokens].find(
    (v): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0,
  );
  if (limit !== undefined) req.maxTokens = limit;
  // OpenAI's end-user id: a tenant source when policies name it (policies/tenant.ts); a bad one names nobody.
  if (typeof json.user === 'string' && json.user.length > 0) req.user = json.user;
  return { ok: true, request: req };
}
