// The chat template's work budget: messages and JSON depth a request may hand it, checked before rendering.
import type { ChatRequest } from './request.js';

/** The limits a template renders within (plugin config: max_template_messages, max_template_depth). */
export interface TemplateBudget {
  maxMessages: number;
  maxDepth: number;
}

/**
 * Whether a value under `roots` lies deeper than `limit` (a root is depth 1), walked without recursion and
 * stopped at the first that does: a body of 100k nested arrays costs a bounded walk, never a stack overflow.
 */
function deeperThan(roots: readonly unknown[], limit: number): boolean {
  const stack: [unknown, number][] = roots.map((r) => [r, 1]);
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d > limit) return true;
    for (const c of Array.isArray(v) ? v : Object.values(v as Record<string, unknown>))
      if (c !== null && typeof c === 'object') stack.push([c, d + 1]);
  }
  return false;
}

/**
 * Why the request is over the template's budget (a bounded, prompt-free detail), or null: a 100k-message body
 * cost 3.6–7.5 s of one thread in the Qwen3 template, and deep tools or tool calls recurse in its `tojson`.
 */
export function templateBudgetProblem(request: ChatRequest, budget: TemplateBudget): string | null {
  const n = request.messages.length;
  if (n > budget.maxMessages) return `${n} messages, over max_template_messages ${budget.maxMessages}`;
  const roots: unknown[] = [request.messages];
  if (request.tools) roots.push(request.tools);
  if (request.documents) roots.push(request.documents);
  if (request.chatTemplateKwargs) roots.push(request.chatTemplateKwargs);
  // messages → message: two levels every chat has before its content or tool calls.
  if (deeperThan(roots, budget.maxDepth + 2))
    return `JSON nested deeper than max_template_depth ${budget.maxDepth}`;
  return null;
}

/** A prompt's size in tokens from its text or body length, where it is not tokenized (~4 characters a token). */
export const estimateTokens = (chars: number): number => Math.ceil(chars / 4);

/**
 * The tokens to tokenize at most: the model's context window when configured and not longer than
 * max_prompt_tokens, else max_prompt_tokens. `window`: the cut is the context window, so a prompt cut there is
 * longer than vLLM accepts (context_window_exceeded).
 */
export function tokenBudget(
  maxPromptTokens: number,
  contextWindow: number | undefined,
): { maxTokens: number; window: boolean } {
  return contextWindow !== undefined && contextWindow <= maxPromptTokens
    ? { maxTokens: contextWindow, window: true }
    : { maxTokens: maxPromptTokens, window: false };
}
