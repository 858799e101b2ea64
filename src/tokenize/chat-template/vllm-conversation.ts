import type { ChatMessage, ChatRequest } from '../../core/request.js';
import { messageText } from './content.js';
import { isRecord } from '../../core/is-record.js';
import { parsePythonJson } from '../../core/python-json.js';

/**
 * The messages and tools vLLM hands a Jinja chat template (entrypoints/chat_utils.py): content as a string
 * (text parts joined with "\n") or, for templates that loop over content parts, as a list of
 * `{type: "text", text}`; tool-call arguments parsed from JSON (`_postprocess_messages`); reasoning under both
 * `reasoning` and `reasoning_content`; tools in pydantic model_dump order with null description/parameters.
 */
export type ContentFormat = 'string' | 'openai';

export type TemplateMessage = Record<string, unknown>;

function parsedArguments(args: unknown): unknown {
  if (args === undefined || args === null || args === '') return {};
  if (typeof args !== 'string') return args;
  try {
    // json.loads, as vLLM: a `1.0` in the arguments stays a float when the template prints it back.
    return parsePythonJson(args);
  } catch {
    return args;
  }
}

function toolCall(call: unknown): unknown {
  if (!isRecord(call) || !isRecord(call.function)) return call;
  return { ...call, function: { ...call.function, arguments: parsedArguments(call.function.arguments) } };
}

export function templateMessage(m: ChatMessage, format: ContentFormat): TemplateMessage {
  const content =
    format === 'string'
      ? messageText(m.content)
      : m.content === null
        ? []
        : typeof m.content === 'string'
          ? [{ type: 'text', text: m.content }]
          : m.content.map((p) => ({ type: 'text', text: p.text }));
  const out: TemplateMessage = { role: m.role, content };
  if (m.role === 'assistant' && m.tool_calls) out.tool_calls = m.tool_calls.map(toolCall);
  if (m.reasoning_content !== undefined) {
    out.reasoning = m.reasoning_content;
    out.reasoning_content = m.reasoning_content;
  }
  if (m.role === 'tool' && m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.name !== undefined) out.name = m.name;
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
