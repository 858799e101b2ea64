// What one request must fit: the matching token limits, the tenant's cap and budget, as counters and a slot.
import type { LimitMatch, Policies, RateLimitPolicy } from '../policies/index.js';
import type { Tenant } from '../policies/index.js';
import { budgetKey, concurrencyKey, scopeBase, windowKey } from './limit-keys.js';
import type { LimitPlan, LimitRequest, PlannedCounter } from './types.js';
import { KEY_MARGIN_MS, WINDOW_MS, windowAt } from './windows.js';

/**
 * How long a concurrency slot holds without a release: a Kong node that dies mid-request frees its slots by
 * then. A request still streaming after it no longer counts against the cap (docs/policies.md says so).
 */
export const SLOT_TTL_MS = 10 * 60_000;

/** Budgets count in millionths of the currency: integer counters, exact sums. */
export const BUDGET_UNITS = 1_000_000;

function matches(m: LimitMatch, tenant: Tenant, model: string | null): boolean {
  const c = tenant.consumer;
  if (m.consumer !== undefined && !(c && [c.username, c.custom_id, c.id].includes(m.consumer))) return false;
  if (m.consumer_group !== undefined && !tenant.consumerGroups.includes(m.consumer_group)) return false;
  if (m.tenant !== undefined && m.tenant !== tenant.name) return false;
  if (m.model !== undefined && m.model !== model) return false;
  return true;
}

/** A policy's identity in its keys: its match and scope (not its list position, not its limits). */
function policySignature(p: RateLimitPolicy): string {
  const m = p.match;
  return JSON.stringify([
    m.consumer ?? null,
    m.consumer_group ?? null,
    m.tenant ?? null,
    m.model ?? null,
    p.per,
  ]);
}

/** Is there anything to count at all? (No policy section, or none of limits, caps, budgets: no limiter.) */
export function limitsConfigured(p: Policies | undefined): boolean {
  if (!p) return false;
  return p.rate_limits.length > 0 || p.tenants.some((t) => t.max_concurrent > 0 || t.daily_budget > 0);
}

/**
 * The request's plan: one counter per limit of every matching policy (per tenant: the tenant's key base; per
 * all: the policy's), the day's cost when the tenant has a budget and the cost is known, and a slot when it
 * has a cap. Pure: keys, amounts and TTLs from the clock given.
 */
export function planRequest(
  policies: Policies,
  prefix: string,
  req: LimitRequest,
  nowMs: number,
  ticketId: string,
): LimitPlan {
  const outputReserved = Math.max(0, req.maxTokens ?? policies.default_output_tokens);
  const prompt = Math.max(0, req.promptTokens);
  const tenantBase = scopeBase(prefix, `t:${req.tenant.name}`);
  const counters: PlannedCounter[] = [];
  policies.rate_limits.forEach((p, i) => {
    if (!matches(p.match, req.tenant, req.model)) return;
    const sig = policySignature(p);
    const base = p.per === 'tenant' ? tenantBase : scopeBase(prefix, `p:${sig}`);
    for (const l of p.limits) {
      const w = windowAt(l.window, nowMs);
      const amount =
        l.tokens === 'prompt' ? prompt : l.tokens === 'output' ? outputReserved : prompt + outputReserved;
      counters.push({
        key: windowKey(base, sig, l.tokens, l.window, w.startMs),
        limit: l.limit,
        amount,
        ttlMs: w.resetMs - nowMs + KEY_MARGIN_MS,
        resetMs: w.resetMs,
        what: { kind: 'tokens', tokens: l.tokens, window: l.window, policy: i },
      });
    }
  });
  const tp = req.tenant.policy;
  if (tp && tp.daily_budget > 0 && req.estimatedCost !== null) {
    const day = windowAt('day', nowMs);
    counters.push({
      key: budgetKey(tenantBase, day.startMs),
      limit: Math.floor(tp.daily_budget * BUDGET_UNITS),
      amount: Math.ceil(Math.max(0, req.estimatedCost) * BUDGET_UNITS),
      ttlMs: day.resetMs - nowMs + KEY_MARGIN_MS,
      resetMs: day.resetMs,
      what: { kind: 'budget' },
    });
  }
  const slot =
    tp && tp.max_concurrent > 0
      ? {
          key: concurrencyKey(tenantBase),
          max: tp.max_concurrent,
          member: ticketId,
          expiresMs: nowMs + SLOT_TTL_MS,
          ttlMs: SLOT_TTL_MS + KEY_MARGIN_MS,
        }
      : null;
  return { nowMs, counters, slot, outputReserved };
}

/** The window length of a token counter, in seconds (the headers' <window>, as Kong's window_size). */
export function windowSeconds(c: PlannedCounter): number {
  return c.what.kind === 'tokens' ? WINDOW_MS[c.what.window] / 1000 : 86_400;
}
