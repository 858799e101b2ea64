// The limiter's store in memory: the Redis scripts' semantics for one node and the discrete-event benchmark.
import type { LimitStore } from './store.js';
import type { AdmitReply, CounterChange, LimitPlan } from './types.js';

/** Counters and slots of one process, expiring as the Redis keys do (by the plan's clock, not the wall's). */
export class MemoryLimitStore implements LimitStore {
  readonly #counters = new Map<string, { value: number; expiresMs: number }>();
  readonly #slots = new Map<string, { members: Map<string, number>; expiresMs: number }>();

  #counter(key: string, nowMs: number): number {
    const c = this.#counters.get(key);
    if (c && c.expiresMs <= nowMs) this.#counters.delete(key);
    return c && c.expiresMs > nowMs ? c.value : 0;
  }

  #slot(key: string, nowMs: number): Map<string, number> | null {
    const s = this.#slots.get(key);
    if (!s) return null;
    if (s.expiresMs <= nowMs) {
      this.#slots.delete(key);
      return null;
    }
    for (const [m, exp] of s.members) if (exp <= nowMs) s.members.delete(m);
    return s.members;
  }

  async admit(plan: LimitPlan): Promise<AdmitReply> {
    const now = plan.nowMs;
    const values = plan.counters.map((c) => this.#counter(c.key, now));
    let refused = plan.counters.findIndex((c, i) => values[i]! + c.amount > c.limit);
    let inFlight = 0;
    if (plan.slot) {
      inFlight = this.#slot(plan.slot.key, now)?.size ?? 0;
      if (refused < 0 && inFlight >= plan.slot.max) refused = plan.counters.length;
    }
    if (refused < 0) {
      plan.counters.forEach((c, i) => {
        values[i] = values[i]! + c.amount;
        this.#counters.set(c.key, { value: values[i]!, expiresMs: now + c.ttlMs });
      });
      if (plan.slot) {
        const members = this.#slot(plan.slot.key, now) ?? new Map<string, number>();
        members.set(plan.slot.member, plan.slot.expiresMs);
        this.#slots.set(plan.slot.key, { members, expiresMs: now + plan.slot.ttlMs });
        inFlight = members.size;
      }
    }
    return { refused, values, inFlight };
  }

  async adjust(changes: CounterChange[], slot: { key: string; member: string } | null, nowMs: number) {
    for (const ch of changes) {
      const c = this.#counters.get(ch.key);
      if (!c || c.expiresMs <= nowMs || ch.delta === 0) continue;
      c.value = Math.max(0, c.value + ch.delta);
    }
    if (slot) this.#slot(slot.key, nowMs)?.delete(slot.member);
  }

  /** Keys held now (specs check that nothing is left behind). */
  get size(): number {
    return this.#counters.size + this.#slots.size;
  }

  async close(): Promise<void> {
    this.#counters.clear();
    this.#slots.clear();
  }
}
