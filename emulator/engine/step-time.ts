// The emulator's cost model of one engine step: compute- or memory-bound forward pass over its work.
import type { ScheduledWork } from './types.js';

/**
 * Cost model of one engine step (bench.md §3.2–3.5, a roofline): the forward pass over every scheduled
 * token is either compute-bound (GEMMs linear in tokens, plus causal attention ∝ new tokens × context) or
 * memory-bound (read all weights once, plus each sequence's KV), whichever is slower; plus fixed
 * per-step and per-sequence overheads.
 */
export interface StepCostModel {
  /** Fixed cost of a step (scheduling, sampling, kernel launches), ms. */
  stepOverheadMs: number;
  /** Per scheduled sequence per step, ms. */
  perSeqOverheadMs: number;
  /** GEMM cost per scheduled token (compute bound), ms: 2·params / (FP8 FLOPS · MFU). */
  prefillMsPerToken: number;
  /** Attention cost per (new token × context token), ms: 4·layers·d_attn / (BF16 FLOPS · MFU). */
  attentionMsPerToken2: number;
  /** Reading all weights once (memory bound floor of any step), ms. */
  weightReadMs: number;
  /** Reading one context token's KV, ms. */
  kvReadMsPerToken: number;
}

export interface StepCost {
  totalMs: number;
  computeMs: number;
  memoryMs: number;
}

export function stepCost(model: StepCostModel, work: readonly ScheduledWork[]): StepCost {
  let compute = 0;
  let kvTokens = 0;
  for (const w of work) {
    const c = w.numTokens;
    // Causal attention: the i-th new token attends to context + i tokens; Σ = c·(p + (c+1)/2) ≈ c·(p + c/2).
    compute += model.prefillMsPerToken * c + model.attentionMsPerToken2 * c * (w.contextTokens + c / 2);
    kvTokens += w.contextTokens + c;
  }
  const memory = model.weightReadMs + model.kvReadMsPerToken * kvTokens;
  const totalMs = model.stepOverheadMs + model.perSeqOverheadMs * work.length + Math.max(compute, memory);
  return { totalMs, computeMs: compute, memoryMs: memory };
}
