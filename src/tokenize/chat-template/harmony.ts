// The built-in `harmony` template: gpt-oss prompts as vLLM's chat endpoint renders them.
import type { ChatMessage, ChatRequest, ContentPart } from '../../core/request.js';
import { KinferenceError } from '../../core/errors.js';
import type { ChatTemplate } from '../types.js';
import { TemplateRaisedError } from './hf-jinja.js';
import { schemaToTypescript } from './harmony-typescript.js';
import { strftime } from './strftime.js';
import { isRecord } from '../../core/is-record.js';

/**
 * gpt-oss (harmony) prompt as vLLM's chat endpoint renders it (`_make_request_with_harmony`:
 * build_harmony_preamble + parse_chat_inputs_to_harmony_messages + render_conversation_for_completion).
 *
 *   <|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
 *   Knowledge cutoff: 2024-06
 *   Current date: YYYY-MM-DD
 *
 *   Reasoning: medium
 *
 *   # Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>
 *   [<|start|>developer<|message|># Instructions\n\n{leading system/developer text}[\n\n# Tools …]<|end|>]
 *   <|start|>user<|message|>…<|end|>  <|start|>assistant<|channel|>final<|message|>…<|end|>  …
 *   <|start|>assistant
 *
 * The system text is the one the gpt-oss HF chat template emits too. The date is VLLM_SYSTEM_START_DATE when
 * set (vLLM's own pin), else today's local date, as vLLM computes it. `reasoning_effort` comes from the
 * request, or from chat_template_kwargs.
 */
const IDENTITY = 'You are ChatGPT, a large language model trained by OpenAI.';
const EFFORTS = new Set(['low', 'medium', 'high']);

interface FunctionTool {
  name: string;
  description: string;
  parameters: unknown;
}

function functionTools(tools: unknown[] | undefined): FunctionTool[] {
  const out: FunctionTool[] = [];
  for (const t of tools ?? []) {
    if (!isRecord(t) || t.type !== 'function' || !isRecord(t.function)) continue;
    const f = t.function;
    out.push({
      name: typeof f.name === 'string' ? f.name : '',
      description: typeof f.description === 'string' ? f.description : '',
      parameters: f.parameters ?? null,
    });
  }
  return out;
}

function toolsSection(tools: FunctionTool[]): string {
  const lines = ['## functions\n', 'namespace functions {\n'];
  for (const t of tools) {
    // Rust's str::lines(): no line for an empty string or after a trailing newline.
    const desc = t.description.split(/\r?\n/);
    if (t.description.endsWith('\n') || t.description.length === 0) desc.pop();
    for (const l of desc) lines.push(`// ${l}`);
    lines.push(
      t.parameters === null
        ? `type ${t.name} = () => any;\n`
        : `type ${t.name} = (_: ${schemaToTypescript(t.parameters, '')}) => any;\n`,
    );
  }
  lines.push('} // namespace functions');
  return ['# Tools', lines.join('\n')].join('\n\n');
}

function developer(instructions: string | null, tools: FunctionTool[]): string {
  const sections: string[] = [];
  if (instructions !== null) sections.push('# Instructions', instructions);
  if (tools.length > 0) sections.push(toolsSection(tools));
  return `<|start|>developer<|message|>${sections.join('\n\n')}<|end|>`;
}

/**
 * A part's text as vLLM's harmony path reads it: from its `text` key only, so a refusal, thinking or
 * tool_reference part has none there (chat_utils renders them, but the harmony path does not use chat_utils).
 */
const keyedText = (p: ContentPart): string | null =>
  p.type !== 'text' || p.from === 'refusal' || p.from === 'thinking' ? null : p.text;

/** flatten_input_text_content: the texts of the parts that have one, joined with ""; null when none has. */
function flatten(content: ChatMessage['content']): string | null {
  if (content === null || typeof content === 'string') return content;
  const texts = content.map(keyedText).filter((t): t is string => t !== null);
  return texts.length > 0 ? texts.join('') : null;
}

/**
 * parse_chat_input_to_harmony_message's text contents for the other messages: one per part, its `text` or ""
 * (refusal, thinking and tool_reference parts), [""] for empty content. A bare string part has no `.get`:
 * vLLM fails.
 */
function partTexts(m: ChatMessage, at: string): string[] {
  if (m.content === null || m.content.length === 0) return [''];
  if (typeof m.content === 'string') return [m.content];
  return m.content.map((p, j) => {
    if (p.type === 'text' && p.from === 'string')
      throw new TemplateRaisedError(`harmony: ${at}.content[${j}] is a bare string, which vLLM fails on`);
    return keyedText(p) ?? '';
  });
}

function argumentsText(call: unknown): { name: string; args: string; id: string | null } {
  const c = isRecord(call) ? call : {};
  const f = isRecord(c.function) ? c.function : {};
  const args = f.arguments;
  return {
    name: typeof f.name === 'string' ? f.name : '',
    args: typeof args === 'string' ? args : args === undefined || args === null ? '' : JSON.stringify(args),
    id: typeof c.id === 'string' ? c.id : null,
  };
}

export function createHarmonyTemplate(now: () => Date = () => new Date()): ChatTemplate {
  return {
    spec: 'harmony',
    render(req: ChatRequest): string {
      const kwEffort = req.chatTemplateKwargs?.reasoning_effort;
      const effort = req.reasoningEffort ?? (typeof kwEffort === 'string' ? kwEffort : 'medium');
      if (!EFFORTS.has(effort))
        throw new KinferenceError(
          'KINF_ERR_TEMPLATE_SPEC',
          `harmony: reasoning_effort "${effort}" is not low|medium|high`,
        );
      const date = process.env.VLLM_SYSTEM_START_DATE || strftime('%Y-%m-%d', now());
      const tools = functionTools(req.tools);
      let out =
        `<|start|>system<|message|>${IDENTITY}\nKnowledge cutoff: 2024-06\nCurrent date: ${date}\n\n` +
        `Reasoning: ${effort}\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.`;
      if (tools.length > 0) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
      out += '<|end|>';

      let messages = req.messages;
      let instructions: string | null = null;
      const first = messages[0];
      if (first && (first.role === 'system' || first.role === 'developer')) {
        instructions = flatten(first.content);
        messages = messages.slice(1);
      }
      const skipped = req.messages.length - messages.length;
      if (instructions || (req.tools !== undefined && req.tools.length > 0))
        out += developer(instructions, tools);

      const toolNames = new Map<string, string>();
      for (const m of messages)
        for (const call of m.tool_calls ?? []) {
          const { id, name } = argumentsText(call);
          if (id !== null) toolNames.set(id, name);
        }
      messages.forEach((m, k) => {
        if (m.role === 'assistant' && m.tool_calls && m.tool_calls.length > 0) {
          const content = flatten(m.content);
          if (content) out += `<|start|>assistant<|channel|>commentary<|message|>${content}<|end|>`;
          for (const call of m.tool_calls) {
            const { name, args } = argumentsText(call);
            out += `<|start|>assistant to=functions.${name}<|channel|>commentary json<|message|>${args}<|call|>`;
          }
          return;
        }
        if (m.role === 'tool') {
          const name = toolNames.get(m.tool_call_id ?? '') ?? '';
          const content = flatten(m.content) ?? '';
          out += `<|start|>functions.${name} to=assistant<|channel|>commentary<|message|>${content}<|end|>`;
          return;
        }
        const texts = partTexts(m, `messages[${k + skipped}]`);
        if (m.role === 'assistant') {
          // vLLM keeps the message only when its first text content is not empty.
          if (texts[0]) out += `<|start|>assistant<|channel|>final<|message|>${texts.join('')}<|end|>`;
        } else if (m.role === 'system' || m.role === 'developer') {
          const content = flatten(m.content);
          if (content !== null) out += developer(content, []);
        } else out += `<|start|>${m.role}<|message|>${texts.join('')}<|end|>`;
      });
      return `${out}<|start|>assistant`;
    },
  };
}
