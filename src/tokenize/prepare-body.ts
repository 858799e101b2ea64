// One body's decision CPU work under its budgets: parse, chat template, tokenize and block keys, any thread.
import { performance } from 'node:perf_hooks';
import { keySeed, type KeySeedInput } from '../core/block-keys.js';
import { boundedDetail } from '../core/bounded-detail.js';
import type { FallbackReason } from '../core/fallback.js';
import type { BlockKey } from '../core/types.js';
import { parseChatBody } from '../core/request.js';
import { estimateTokens, templateBudgetProblem, tokenBudget } from '../core/template-budget.js';
import type { PrepareResult, PrepareSettings, PrepareTimings } from './off-thread/protocol.js';
import { renderMemoized } from './render-memo.js';
import type { ChatTemplate, PromptTokenizer } from './types.js';

/** What the thread preparing a body holds: its loaded template and tokenizer, and its memo of recent keys. */
export interface PreparingThread {
  /** The config's template; throws when it failed to load, or is still loading. */
  template(): ChatTemplate;
  /** The config's tokenizer; throws as `template` does. */
  promptTokenizer(): PromptTokenizer;
  /** The prompt's chained block keys (a thread keeps a memo of its recent prompts' chains). */
  keys(tokens: readonly number[], blockSize: number, seed: BlockKey): BlockKey[];
  /** The fallback a template or tokenizer that threw gives (one still loading: tokenizer_loading). */
  failure(e: unknown, step: 'template' | 'tokenizer'): FallbackReason;
  /** Time the decision had spent before this step, counted against its budget (ms). */
  elapsedBeforeMs?: number;
}

const own = <T>(rec: Readonly<Record<string, T>> | null, key: string): T | undefined =>
  rec !== null && Object.hasOwn(rec, key) ? rec[key] : undefined;

/**
 * The router's parse, render, tokenize and keys steps for one body, in a decision worker
 * (off-thread/prepare.ts) or on the plugin's thread (router/steps/prepare.ts): the block keys and the
 * request's few facts, or the reason to route on load alone. Each budget (messages and depth before the
 * template, the decision's time after it, the model's context window while tokenizing) names its fallback.
 */
export async function prepareBody(
  s: PrepareSettings,
  body: Uint8Array | string,
  thread: PreparingThread,
): Promise<PrepareResult> {
  const t0 = performance.now() - (thread.elapsedBeforeMs ?? 0);
  const timings: PrepareTimings = { parseMs: 0, templateMs: 0, tokenizeMs: 0, keysMs: 0 };
  let t = performance.now();
  const parsed = parseChatBody(body, s.maxBodyBytes);
  timings.parseMs = performance.now() - t;
  const size = typeof body === 'string' ? body.length : body.byteLength;
  const base = { promptTokens: 0, truncated: false, promptChars: { cached: 0, tokenized: 0 }, timings };
  const fail = (reason: FallbackReason, detail: string, more: Partial<PrepareResult> = {}): PrepareResult =>
    ({
      ok: false,
      reason,
      detail,
      model: null,
      lora: null,
      maxTokens: null,
      user: null,
      ...base,
      ...more,
    }) as PrepareResult;
  if (!parsed.ok) {
    const requested = parsed.model ?? null;
    const baseModel = requested === null ? undefined : own(s.loraAdapters, requested);
    return fail(parsed.reason, parsed.detail, {
      model: baseModel ?? requested,
      lora: baseModel ? requested : null,
    });
  }
  const request = parsed.request;
  const baseModel = own(s.loraAdapters, request.model);
  const facts = {
    model: baseModel ?? request.model,
    lora: baseModel ? request.model : null,
    maxTokens: request.maxTokens ?? null,
    user: request.user ?? null,
  };
  const problem = templateBudgetProblem(request, { maxMessages: s.maxMessages, maxDepth: s.maxDepth });
  if (problem)
    return fail('template_budget_exceeded', problem, { ...facts, promptTokens: estimateTokens(size) });

  t = performance.now();
  let prompt: string;
  try {
    prompt = renderMemoized(thread.template(), request);
  } catch (e) {
    return fail(thread.failure(e, 'template'), boundedDetail(e), facts);
  } finally {
    timings.templateMs = performance.now() - t;
  }
  const elapsed = performance.now() - t0;
  if (elapsed > s.budgetMs)
    return fail(
      'decision_budget_exceeded',
      `parse and template took ${Math.round(elapsed)} ms, over decision_budget_ms ${s.budgetMs}`,
      { ...facts, promptTokens: estimateTokens(prompt.length) },
    );

  const cut = tokenBudget(s.maxPromptTokens, own(s.maxModelLen, facts.model));
  t = performance.now();
  let tokenized;
  try {
    tokenized = await thread.promptTokenizer().tokenize(prompt, cut.maxTokens);
  } catch (e) {
    return fail(thread.failure(e, 'tokenizer'), boundedDetail(e), {
      ...facts,
      promptTokens: estimateTokens(prompt.length),
    });
  } finally {
    timings.tokenizeMs = performance.now() - t;
  }
  const { tokens, truncated } = tokenized;
  const promptChars = { cached: tokenized.cachedChars, tokenized: tokenized.tokenizedChars };
  if (cut.window && truncated)
    return fail(
      'context_window_exceeded',
      `prompt over ${cut.maxTokens} tokens, max_model_len of ${facts.model}`,
      { ...facts, promptTokens: cut.maxTokens, truncated, promptChars },
    );

  t = performance.now();
  const seed: KeySeedInput = { model: facts.model, lora: facts.lora, cacheSalt: request.cacheSalt ?? null };
  const keys = thread.keys(tokens, s.blockSize, keySeed(seed));
  timings.keysMs = performance.now() - t;
  return {
    ok: true,
    ...facts,
    hasVllmXargs: request.hasVllmXargs === true,
    repeatable: thread.template().pure === true,
    keys,
    promptTokens: tokens.length,
    truncated,
    promptChars,
    timings,
  };
}
