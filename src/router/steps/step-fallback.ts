// StepFallback: what a step returns when the request cannot go on down the pipeline.
import type { FallbackReason } from '../../core/fallback.js';

/**
 * A step's answer when the request cannot go on down the pipeline: the router routes it without cache
 * knowledge (fallback.ts) for this reason. Steps return it rather than throw: only a bug throws.
 */
export class StepFallback {
  constructor(
    readonly reason: FallbackReason,
    /** Bounded and prompt-free (bounded-detail.ts). */
    readonly detail: string,
    /** The prompt's size when the step knows better than the steps before it (an estimate on tokenizer errors). */
    readonly promptTokens?: number,
  ) {}
}
