// LimitStore: where counters live (Redis, or memory for one node and the discrete-event benchmark).
import type { AdmitReply, CounterChange, LimitPlan } from './types.js';

/**
 * The two operations of a limiter's store, with one meaning for every backend (spec/conformance/limits.ts
 * runs one suite against both): `admit` checks every counter and the slot and counts the plan all or
 * nothing; `adjust` adds deltas to counters that still exist (none below zero) and frees a slot.
 */
export interface LimitStore {
  admit(plan: LimitPlan): Promise<AdmitReply>;
  adjust(
    changes: CounterChange[],
    slot: { key: string; member: string } | null,
    nowMs: number,
  ): Promise<void>;
  close(): Promise<void>;
}
