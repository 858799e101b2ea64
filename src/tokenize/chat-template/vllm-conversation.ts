// The messages and tools vLLM hands a Jinja chat template, shaped as vLLM's chat_utils builds them.
import type { ChatMessage, ChatRequest } from '../../core/request.js';
import { messageText } from './content.js';
import { isRecord } from '../../core/is-record.js';
import { parsePythonJson } from '../../core/python-json.js';

/**
 * The messages and tools vLLM hands a Jinja chat template (chat_utils `parse_chat_messages`): content as a
 * string (text parts joined with "\n") or, for templates that loop over content parts, as a list of
 * `{type: "text", text}`; tool-call arguments parsed from JSON (`_postprocess_messages`); reasoning under both
 * `reasoning` and `reasoning_content`; tools in pydantic model_dump order with null description/parameters.
 * Checked against vllm/frontend/entrypoints/chat_utils.py at 055e47c.
 */
export type ContentFormat = 'string' | 'openai';

export type TemplateMessage = Record<string, unknown>;

/**
 * `_postprocess_messages`: a JSON object string becomes that object; an object stays; anything else (missing,
 * "", invalid JSON, JSON that is not an object such as `[]` or `42`, a non-string) becomes `{}`, since
 * templates read the arguments as a mapping. (Older vLLM, e.g. vllm/entrypoints/chat_utils.py at 001eadc, kept
 * a decoded list or number and a list as sent.)
 */
function parsedArguments(args: unknown): Record<string, unknown> {
  if (isRecord(args)) return args;
  if (typeof args !== 'string' || args === '') return {};
  try {
    // json.loads, as vLLM: a `1.0` in the arguments stays a float when the template prints it back.
    const parsed = parsePythonJson(args);
    return isRecord(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

function toolCall(call: unknown): unknown {
  if (!isRecord(call) || !isRecord(call.function)) return call;
  return { ...call, function: { ...call.function, arguments: parsedArguments(call.function.arguments) } };
}

type TemplatePart = { type: 'text'; text: string } | { type: 'tool_reference'; name: string | null };

/**
 * The content of one message as `_parse_chat_message_content_parts` builds it for the format. In "openai"
 * format `_parse_chat_message_content_part` passes a tool_reference on as `{type, name}`, a null name too.
 */
function templateContent(m: ChatMessage, format: ContentFormat): string | TemplatePart[] {
  if (format === 'string') return messageText(m.content);
  if (m.content === null) return [];
  if (typeof m.content === 'string') return [{ type: 'text', text: m.content }];
  return m.content.map((p) =>
    p.type === 'text' ? { type: 'text', text: p.text } : { type: 'tool_reference', name: p.name },
  );
}

/**
 * One message as `_parse_chat_message_content` builds it, with `_postprocess_messages` applied. Keys are set in
 * vLLM's order, which a template that loops over a message's items would show.
 */
export function templateMessage(m: ChatMessage, format: ContentFormat): TemplateMessage {
  const content = templateContent(m, format);
  const out: TemplateMessage = { role: m.role, content };
  if (m.role === 'assistant') {
    // `_postprocess_messages` drops an empty list, keeping templates that test `tool_calls is defined` (or
    // `'tool_calls' in message`) on the plain assistant path.
    if (m.tool_calls && m.tool_calls.length > 0) out.tool_calls = m.tool_calls.map(toolCall);
    if (m.reasoning !== undefined) {
      out.reasoning = m.reasoning;
      out.reasoning_content = m.reasoning; // vLLM keeps the deprecated key for older templates
    }
  } else if (m.role === 'tool') {
    if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
    // "openai" format: a tool result whose parts are all text becomes one string, the texts joined with "\n"
    // (empty ones too: that format keeps empty parts), "" when there are none; templates mostly print a tool
    // message's content as a string. Only a part of another type (tool_reference) keeps the list.
    if (Array.isArray(content)) {
      const texts = content.flatMap((p) => (p.type === 'text' ? [p.text] : []));
      if (texts.length === content.length) out.content = texts.join('\n');
    }
  }
  if (m.name !== undefined) out.name = m.name;
  if (m.task !== undefined) out.task = m.task;
  // Present on every developer message, None when it has none: `message.tools is defined` holds.
  if (m.role === 'developer') out.tools = m.tools ?? null;
  return out;
}

/**
 * `tool.model_dump()` of vLLM's ChatCompletionToolsParam as its serializers shape it (vllm#50334, July 2026):
 * declared fields only, in their order (`type`, `function` {name, description, parameters, strict,
 * defer_loading}, `defer_loading`), with `strict` and `defer_loading` left out when unset, and the tool's
 * `defer_loading` copied into a function that has none. Extra keys a client adds (`cache_control`,
 * `examples`) never reach the template.
 */
export function templateTool(tool: unknown): unknown {
  if (!isRecord(tool) || !isRecord(tool.function)) return tool;
  const fn = tool.function;
  const set = (v: unknown): boolean => v !== undefined && v !== null;
  const deferLoading = set(fn.defer_loading) ? fn.defer_loading : tool.defer_loading;
  return {
    type: tool.type ?? 'function',
    function: {
      name: fn.name,
      description: fn.description ?? null,
      parameters: fn.parameters ?? null,
      ...(set(fn.strict) ? { strict: fn.strict } : {}),
      ...(set(deferLoading) ? { defer_loading: deferLoading } : {}),
    },
    ...(set(tool.defer_loading) ? { defer_loading: tool.defer_loading } : {}),
  };
}

/** vLLM's `_detect_developer_role_support`: the template source names the "developer" role. */
export function templateNamesDeveloper(source: string): boolean {
  return source.includes('"developer"') || source.includes("'developer'");
}

/** A system message's text as `_consolidate_system_messages` reads it: list parts' texts joined by "\n". */
function systemText(content: unknown): string {
  if (!Array.isArray(content)) return typeof content === 'string' ? content : '';
  const parts: string[] = [];
  for (const p of content as unknown[])
    if (isRecord(p) && typeof p.text === 'string') parts.push(p.text);
    else if (typeof p === 'string') parts.push(p);
  return parts.join('\n');
}

/**
 * vLLM's `safe_apply_chat_template` (renderers/hf.py) for a template that does not name the "developer" role
 * (most: Qwen3, Llama, Mistral): developer messages become system ones without their tools, then, when a
 * system message is not alone at the front, every system message is merged into one there, the non-empty
 * texts joined by a blank line (the merged content is a string, whatever the content format). Left as it
 * was, a developer message is dropped by such templates and the prompt differs from the first token.
 */
export function developerAsSystem(messages: TemplateMessage[]): TemplateMessage[] {
  if (!messages.some((m) => m.role === 'developer')) return messages;
  const converted = messages.map((m) => {
    if (m.role !== 'developer') return m;
    const { tools: _dropped, ...rest } = m;
    return { ...rest, role: 'system' };
  });
  const texts: string[] = [];
  const others: TemplateMessage[] = [];
  let merge = false;
  converted.forEach((m, i) => {
    if (m.role !== 'system') return void others.push(m);
    if (i > 0 || texts.length > 0) merge = true;
    const text = systemText(m.content);
    if (text) texts.push(text);
  });
  return merge ? [{ role: 'system', content: texts.join('\n\n') }, ...others] : converted;
}

/**
 * What the template gets. `namesDeveloper`: the template's source names the "developer" role (else
 * developerAsSystem applies). `tools: []` is handed on as an empty list, as vLLM does (Llama 3.x templates
 * test `tools is not none`).
 */
export function templateConversation(
  req: ChatRequest,
  format: ContentFormat,
  namesDeveloper = true,
): { messages: TemplateMessage[]; tools: unknown[] | null } {
  const messages = req.messages.map((m) => templateMessage(m, format));
  return {
    messages: namesDeveloper ? messages : developerAsSystem(messages),
    tools: req.tools ? req.tools.map(templateTool) : null,
  };
}
