// `hf:` chat templates: a model's Jinja template rendered with vLLM's inputs, kwargs and content format.
import { readFileSync } from 'node:fs';
import { Environment, parse, tokenize } from '@huggingface/jinja';
import type { ChatRequest } from '../../core/request.js';
import { KinferenceError } from '../../core/errors.js';
import type { ChatTemplate } from '../types.js';
import { pyStrip } from '../../core/python-str.js';
import { PythonInterpreter } from './python-jinja.js';
import { strftime } from './strftime.js';
import {
  templateConversation,
  templateNamesDeveloper,
  type ContentFormat,
  type TemplateMessage,
} from './vllm-conversation.js';
import { isRecord } from '../../core/is-record.js';

/** A `raise_exception(...)` call from the template: the request cannot be rendered (vLLM answers 400). */
export class TemplateRaisedError extends Error {
  override readonly name = 'TemplateRaisedError';
  /** The text as vLLM reports it (raise_exception's message; jinja2's TemplateError carries only that). */
  readonly raised: string;

  constructor(message: string, raised: string = message) {
    super(message);
    this.raised = raised;
  }
}

const SPECIAL_TOKEN_KEYS = [
  'bos_token',
  'eos_token',
  'unk_token',
  'sep_token',
  'pad_token',
  'cls_token',
  'mask_token',
];

/** HF's `special_tokens_map`: tokens may be strings or AddedToken dicts; unset ones are left out. */
function specialTokensMap(cfg: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of SPECIAL_TOKEN_KEYS) {
    const v = cfg[k];
    if (typeof v === 'string') out[k] = v;
    else if (isRecord(v) && typeof v.content === 'string') out[k] = v.content;
  }
  if (Array.isArray(cfg.additional_special_tokens))
    out.additional_special_tokens = cfg.additional_special_tokens.map((t) =>
      isRecord(t) && typeof t.content === 'string' ? t.content : t,
    );
  return out;
}

/**
 * vLLM's "auto" content format: "openai" when the template iterates over a message's content (it expects
 * parts), else "string". vLLM inspects the Jinja AST (`_iter_nodes_assign_content_item`): a loop over
 * `<msg>.content` or `<msg>['content']` (through filters), or over a bare variable named `content`, as
 * Qwen3.5's render_content macro does. A regex over the loop headers covers the templates in the wild.
 */
export function detectContentFormat(source: string): ContentFormat {
  const overMessage =
    /\{%-?\s*for\s+\w+\s+in\s+\w+(?:\.content|\[\s*['"]content['"]\s*\])\s*(?:\|[^%]*)?-?%\}/;
  // A bare `content` (a filter would make the loop iterate over something else in vLLM's check).
  const overContent = /\{%-?\s*for\s+\w+\s+in\s+content\s*(?:if\s[^%]*)?-?%\}/;
  return overMessage.test(source) || overContent.test(source) ? 'openai' : 'string';
}

interface LoadedTemplate {
  source: string;
  toolUse: string | null;
  specials: Record<string, unknown>;
}

function readTemplateFile(spec: string, path: string): LoadedTemplate {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_TEMPLATE_SPEC',
      `${spec}: cannot read ${path}: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  if (path.endsWith('.jinja') || path.endsWith('.j2')) return { source: text, toolUse: null, specials: {} };
  let cfg: unknown;
  try {
    cfg = JSON.parse(text);
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_TEMPLATE_SPEC',
      `${spec}: ${path} is not JSON: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  if (!isRecord(cfg))
    throw new KinferenceError('KINF_ERR_TEMPLATE_SPEC', `${spec}: ${path} is not a JSON object`);
  const ct = cfg.chat_template;
  if (typeof ct === 'string') return { source: ct, toolUse: null, specials: specialTokensMap(cfg) };
  if (Array.isArray(ct)) {
    // Named templates: HF uses "tool_use" when tools are given and it exists, else "default".
    const named = new Map<string, string>();
    for (const t of ct)
      if (isRecord(t) && typeof t.name === 'string' && typeof t.template === 'string')
        named.set(t.name, t.template);
    const def = named.get('default');
    if (def !== undefined)
      return { source: def, toolUse: named.get('tool_use') ?? null, specials: specialTokensMap(cfg) };
  }
  throw new KinferenceError(
    'KINF_ERR_TEMPLATE_SPEC',
    `${spec}: ${path} has no chat_template (string or "default")`,
  );
}

type Program = ReturnType<typeof parse>;

/** vLLM's merge_kwargs: a None or "auto" value does not override what it merges over. */
function unsetDropped(kwargs: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(kwargs)) if (v !== null && v !== undefined && v !== 'auto') out[k] = v;
  return out;
}

function compile(spec: string, source: string): Program {
  try {
    return parse(tokenize(source, { lstrip_blocks: true, trim_blocks: true }));
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_TEMPLATE_SPEC',
      `${spec}: template does not parse: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
}

function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  const out: number[] = [];
  for (let i = from; step > 0 ? i < to : i > to; i += step) out.push(i);
  return out;
}

/**
 * Template.render, but with our raise_exception (a typed error), a strftime_now that follows Python's
 * C-locale directives (the library's uses Intl month names, which depend on the host locale), and an
 * interpreter that prints and strips as Python's jinja2 (python-jinja.ts).
 */
function run(program: Program, vars: Record<string, unknown>, globals: Record<string, unknown>): string {
  const env = new Environment();
  for (const [k, v] of Object.entries({
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    range,
    ...globals,
  }))
    env.set(k, v);
  for (const [k, v] of Object.entries(vars)) if (!(k in globals)) env.set(k, v);
  const result = new PythonInterpreter(env).run(program);
  return String(result.value);
}

/** transformers' marker for continue_final_message (render_jinja_template). */
const CONTINUE_TAG = 'CONTINUE_FINAL_MESSAGE_TAG ';

/**
 * transformers' continue_final_message, first half: the final message's text (its string content, or the last
 * part that has a `text`) with the marker appended, on copies. Returns the text as it was, for the check.
 */
function tagFinalMessage(
  messages: TemplateMessage[],
  source: string,
): { messages: TemplateMessage[]; final: string } {
  const last = messages[messages.length - 1];
  const content = last?.content;
  if (last === undefined || content === undefined || content === null)
    throw new TemplateRaisedError(
      'continue_final_message is set but the final message has no "content" to continue!',
    );
  if (!source.includes('content'))
    throw new TemplateRaisedError(
      'continue_final_message is set to "content" but this is not an accepted field in the chat_template',
    );
  let final: string;
  let tagged: unknown;
  if (Array.isArray(content)) {
    const parts = [...(content as unknown[])];
    const i = parts.findLastIndex((p) => isRecord(p) && 'text' in p);
    if (i < 0)
      throw new TemplateRaisedError(
        'continue_final_message is set but we could not find any text to continue in the final message!',
      );
    const part = parts[i] as Record<string, unknown>;
    final = String(part.text);
    parts[i] = { ...part, text: final + CONTINUE_TAG };
    tagged = parts;
  } else {
    final = String(content);
    tagged = final + CONTINUE_TAG;
  }
  return { messages: [...messages.slice(0, -1), { ...last, content: tagged }], final };
}

/** Second half: cut the render at the marker (and the whitespace before it, when the template trimmed it). */
function cutAtTag(rendered: string, final: string): string {
  const tag = CONTINUE_TAG.trim();
  if (!rendered.includes(pyStrip(final, null, true, true)) || !rendered.includes(tag))
    throw new TemplateRaisedError(
      'continue_final_message is set but the final message does not appear in the chat after applying the chat template',
    );
  const at = rendered.lastIndexOf(tag);
  return rendered.startsWith(CONTINUE_TAG, at)
    ? rendered.slice(0, at)
    : pyStrip(rendered.slice(0, at), null, false, true);
}

/**
 * `hf:<tokenizer_config.json | template.jinja>`: the model's own Jinja template (compiled once), rendered
 * with the variables HF/vLLM pass: messages, tools, add_generation_prompt, the special tokens,
 * chat_template_kwargs spread in (e.g. enable_thinking), raise_exception and strftime_now.
 */
export function createHfTemplate(
  spec: string,
  path: string,
  now: () => Date = () => new Date(),
  defaultKwargs: Readonly<Record<string, unknown>> = {},
): ChatTemplate {
  const loaded = readTemplateFile(spec, path);
  const prepare = (source: string) => ({
    source,
    template: compile(spec, source),
    format: detectContentFormat(source),
    namesDeveloper: templateNamesDeveloper(source),
  });
  const main = prepare(loaded.source);
  const toolUse = loaded.toolUse === null ? null : prepare(loaded.toolUse);
  const raise_exception = (msg: unknown): never => {
    throw new TemplateRaisedError(`chat template raised: ${String(msg)}`, String(msg));
  };
  const strftime_now = (fmt: unknown): string => strftime(String(fmt), now());
  const hasDefaults = Object.keys(defaultKwargs).length > 0;
  const usesClock = (s: string): boolean => s.includes('strftime_now');
  return {
    spec,
    pure: !usesClock(main.source) && (toolUse === null || !usesClock(toolUse.source)),
    render(req: ChatRequest): string {
      // HF picks the tool_use template whenever tools are given, an empty list too.
      const t = toolUse !== null && req.tools !== undefined ? toolUse : main;
      const conversation = templateConversation(req, t.format, t.namesDeveloper);
      const { tools } = conversation;
      const continued = req.continueFinalMessage ? tagFinalMessage(conversation.messages, t.source) : null;
      const messages = continued?.messages ?? conversation.messages;
      const { messages: _ignored, ...kwargs } = req.chatTemplateKwargs ?? {};
      // vLLM's build_chat_params: its own values override chat_template_kwargs; then with_defaults puts the
      // whole over --default-chat-template-kwargs. Neither merge lets an unset value (None, "auto") override.
      const effort = req.reasoningEffort;
      const requested = {
        ...kwargs,
        ...(req.documents !== undefined ? { documents: req.documents } : {}),
        ...(effort !== undefined ? { reasoning_effort: effort } : {}),
        // Thinking follows the effort for templates that opt in (Qwen3, Gemma), unless the request's kwargs say.
        ...(effort !== undefined && !Object.hasOwn(kwargs, 'enable_thinking')
          ? { enable_thinking: effort !== 'none' }
          : {}),
      };
      // with_defaults is a no-op without server defaults: a None in the request's kwargs then stays None.
      const merged = hasDefaults ? { ...defaultKwargs, ...unsetDropped(requested) } : requested;
      const rendered = run(
        t.template,
        {
          ...loaded.specials,
          documents: null,
          ...merged,
          messages,
          tools,
          add_generation_prompt: req.addGenerationPrompt && !req.continueFinalMessage,
          continue_final_message: req.continueFinalMessage,
        },
        { raise_exception, strftime_now },
      );
      return continued ? cutAtTag(rendered, continued.final) : rendered;
    },
  };
}
