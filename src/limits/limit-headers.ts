// The X-AI-RateLimit-* headers of Kong's ai-rate-limiting-advanced, and the 429 words, from a plan and reply.
import { windowSeconds } from './plan.js';
import type { AdmitReply, LimitPlan, PlannedCounter } from './types.js';
import { secondsUntil } from './windows.js';

/**
 * Kong's ai-rate-limiting-advanced names its headers X-AI-RateLimit-{Limit,Remaining}-{window}-{provider},
 * window = window_size in seconds, plus X-AI-RateLimit-Reset and, on a 429, X-AI-RateLimit-Retry-After and
 * Retry-After. Ours are per token kind where Kong's are per provider (one gateway, one fleet):
 * X-AI-RateLimit-Limit-60-prompt, -Remaining-60-prompt, -Reset-60-prompt (seconds). When two policies limit
 * one kind per one window, the header reports the one with the least left.
 */
export function limitHeaders(plan: LimitPlan, reply: AdmitReply): Record<string, string> {
  const best = new Map<string, { c: PlannedCounter; remaining: number }>();
  plan.counters.forEach((c, i) => {
    if (c.what.kind !== 'tokens') return;
    const name = `${windowSeconds(c)}-${c.what.tokens}`;
    const remaining = Math.max(0, c.limit - (reply.values[i] ?? 0));
    const prev = best.get(name);
    if (!prev || remaining < prev.remaining) best.set(name, { c, remaining });
  });
  const h: Record<string, string> = {};
  let reset = Infinity;
  for (const [name, { c, remaining }] of best) {
    h[`X-AI-RateLimit-Limit-${name}`] = String(c.limit);
    h[`X-AI-RateLimit-Remaining-${name}`] = String(remaining);
    const s = secondsUntil(c.resetMs, plan.nowMs);
    h[`X-AI-RateLimit-Reset-${name}`] = String(s);
    reset = Math.min(reset, s);
  }
  if (Number.isFinite(reset)) h['X-AI-RateLimit-Reset'] = String(reset);
  return h;
}

/** What refused a request, for the client: the error code, a message naming the limit, and when to retry. */
export function refusal(
  plan: LimitPlan,
  reply: AdmitReply,
): { code: string; message: string; retryAfterS: number } {
  const i = reply.refused;
  const c = plan.counters[i];
  if (!c) {
    const max = plan.slot?.max ?? 0;
    return {
      code: 'concurrency_cap_exceeded',
      message: `the tenant has ${reply.inFlight} requests in flight, its cap (max_concurrent) is ${max}; retry when one ends`,
      retryAfterS: 1,
    };
  }
  const retryAfterS = secondsUntil(c.resetMs, plan.nowMs);
  const found = reply.values[i] ?? 0;
  if (c.what.kind === 'budget') {
    const f = (u: number) => (u / 1_000_000).toFixed(6).replace(/\.?0+$/, '');
    return {
      code: 'daily_budget_exceeded',
      message: `the tenant's daily budget is ${f(c.limit)}, ${f(found)} is spent today (UTC) and this request is estimated at ${f(c.amount)}`,
      retryAfterS,
    };
  }
  const { tokens, window } = c.what;
  const what = tokens === 'total' ? 'tokens' : `${tokens} tokens`;
  const never = c.amount > c.limit;
  return {
    code: `${tokens}_tokens_per_${window}_exceeded`,
    message: never
      ? `this request needs ${c.amount} ${what}, more than the limit of ${c.limit} per ${window} (rate_limits.${c.what.policy}) allows at all`
      : `limit of ${c.limit} ${what} per ${window} (rate_limits.${c.what.policy}): ${found} used in this window, this request needs ${c.amount}`,
    retryAfterS,
  };
}
