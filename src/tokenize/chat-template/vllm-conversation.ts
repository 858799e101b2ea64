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

/** `tool.model_dump()` of vLLM's ChatCompletionToolsParam: declared fields first, extras kept after. */
export function templateTool(tool: unknown): unknown {
  if (!isRecord(tool) || !isRecord(tool.function)) return tool;
  const { name, description, parameters, ...fnExtra } = tool.function;
  const { type, function: _fn, ...extra } = tool;
  return {
    type: type ?? 'function',
    function: { name, description: description ?? null, parameters: parameters ?? null, ...fnExtra },
    ...extra,
  };
}

export function templateConversation(
  req: ChatRequest,
  format: ContentFormat,
): { messages: TemplateMessage[]; tools: unknown[] | null } {
  return {
    messages: req.messages.map((m) => templateMessage(m, format)),
    tools: req.tools && req.tools.length > 0 ? req.tools.map(templateTool) : null,
  };
}
