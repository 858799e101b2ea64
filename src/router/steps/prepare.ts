// The prepare step: parse, template, tokenize and block keys, in a decision worker or on this thread.
import { performance } from 'node:perf_hooks';
import type { PluginConfig } from '../../config/plugin-config.js';
import { NOT_READ_AS_CHAT } from '../../core/fallback.js';
import type { BlockKey } from '../../core/types.js';
import { estimateTokens } from '../../core/template-budget.js';
import { prepareBody, type PreparingThread } from '../../tokenize/prepare-body.js';
import type { ChatTemplate, PromptTokenizer } from '../../tokenize/types.js';
import type { ContextWindows } from '../context-windows.js';
import { modelOf, prepareSettings, type PrepareInPool } from '../decision-pool.js';
import { ResourceLoadingError } from '../resource-load.js';
import type { Stopwatch } from '../stopwatch.js';
import type { FallbackContext } from './fallback.js';
import { chainKeys } from './keys.js';
import { servedModel } from './served-model.js';
import { StepFallback } from './step-fallback.js';

/** A request made ready for the lookup: its model, block keys and the facts the later steps read. */
export interface Prepared {
  model: string;
  lora: string | null;
  keys: BlockKey[];
  promptTokens: number;
  truncated: boolean;
  hasVllmXargs: boolean;
}

/** What the request's steps have learned of it so far: what a fallback reports. */
export type Learned = Pick<FallbackContext, 'model' | 'lora' | 'promptTokens' | 'truncated' | 'promptChars'>;

export interface PrepareContext {
  config: PluginConfig;
  template: () => ChatTemplate;
  promptTokenizer: () => PromptTokenizer;
  /**
   * The decision pool's entry (decision-pool.ts), given the context windows to cut at: null while no worker
   * can, absent without a pool.
   */
  prepare?: PrepareInPool | null;
  /** Each model's context window (the config's max_model_len, else its pods'). */
  windows: ContextWindows;
  watch: Stopwatch;
  /** Filled in as the steps learn the request's facts (a fallback reports them). */
  learned: Learned;
}

export interface PrepareOutcome {
  prepared: Prepared | StepFallback;
  maxTokens: number | null;
  /** The body's OpenAI `user` once it was read as chat (the tenant is resolved from it); undefined: not read. */
  user: string | null | undefined;
}

const bodySize = (body: Uint8Array | string): number =>
  typeof body === 'string' ? body.length : body.byteLength;

/**
 * The prepare step: the request's model, prompt tokens and block keys. In a decision worker when the pool
 * takes it (its step times are the worker's; the hand-over counts in parseMs), else on this thread; over a
 * budget (messages, depth, time, the model's context window) a named StepFallback.
 */
export async function prepareRequest(
  body: Uint8Array | string,
  ctx: PrepareContext,
): Promise<PrepareOutcome> {
  const { watch, learned, config } = ctx;
  const t = performance.now();
  const pooled = ctx.prepare?.(body, ctx.windows.table()) ?? null;
  const r = await (pooled ??
    prepareBody({ ...prepareSettings(config, 0), maxModelLen: ctx.windows.table() }, body, thisThread(ctx)));
  const waited = performance.now() - t;
  if (!('timings' in r)) {
    // No answer (out of time, the worker died): on load alone, among the pods of the body's model.
    watch.timings.parseMs += waited;
    const model = modelOf(body);
    learned.model = model === null ? null : servedModel(config, model).model;
    learned.lora = model === null ? null : servedModel(config, model).lora;
    return {
      prepared: new StepFallback(r.reason, r.detail, estimateTokens(bodySize(body))),
      maxTokens: null,
      user: undefined,
    };
  }
  const w = r.timings;
  watch.timings.parseMs += Math.max(0, waited - w.templateMs - w.tokenizeMs - w.keysMs);
  watch.timings.templateMs += w.templateMs;
  watch.timings.tokenizeMs += w.tokenizeMs;
  watch.timings.keysMs += w.keysMs;
  learned.model = r.model;
  learned.lora = r.lora;
  learned.truncated = r.truncated;
  learned.promptChars = r.promptChars;
  learned.promptTokens = r.promptTokens;
  const readAsChat = r.model !== null && (r.ok || !NOT_READ_AS_CHAT.has(r.reason));
  return {
    prepared: r.ok
      ? {
          model: r.model,
          lora: r.lora,
          keys: r.keys as BlockKey[],
          promptTokens: r.promptTokens,
          truncated: r.truncated,
          hasVllmXargs: r.hasVllmXargs,
        }
      : new StepFallback(r.reason, r.detail, r.promptTokens || undefined),
    maxTokens: r.maxTokens,
    user: readAsChat ? r.user : undefined,
  };
}

/**
 * This thread's side of the prepare step (no decision workers, or none ready yet): the config's template and
 * tokenizer as loaded here (still loading: tokenizer_loading), the process's memo of recent chains, and the
 * time the decision has spent so far, counted against decision_budget_ms.
 */
function thisThread(ctx: PrepareContext): PreparingThread {
  return {
    template: ctx.template,
    promptTokenizer: ctx.promptTokenizer,
    keys: chainKeys,
    failure: (e, step) =>
      e instanceof ResourceLoadingError
        ? 'tokenizer_loading'
        : step === 'template'
          ? 'template_error'
          : 'tokenizer_error',
    elapsedBeforeMs: ctx.watch.elapsedMs(),
  };
}
