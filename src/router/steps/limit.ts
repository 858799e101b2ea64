// The limit step: token limits, caps and budgets admitted beside the index lookup (src/limits).
import { TokenLimiter, type ActualUsage, type LimitVerdict } from '../../limits/index.js';
import type { Policies, Tenant } from '../../policies/index.js';
import { estimateCost, priceFor, tokenPrices } from '../../usage/index.js';

/** What the outcome carries of the limits: the verdict, and how the log phase ends the request's counts. */
export interface RouteLimit {
  verdict: LimitVerdict;
  /** The answer ended: reservations settle to the actual use (null fields: counted as reserved). */
  settle(actual: ActualUsage): Promise<string | null>;
  /** The request never ran (shed later, failed upstream): everything counted is given back. */
  release(): Promise<string | null>;
}

/**
 * The request's estimated cost for a daily budget, at admission (before the lookup: every prompt token priced
 * as uncached, an upper bound; the end settles to the real cost), with src/usage's prices. A model priced only
 * per GPU-hour has no per-token price before a pod is chosen: null, not counted at admission (the end counts it).
 */
export function admissionCost(
  policies: Policies,
  model: string | null,
  promptTokens: number,
  outputTokens: number,
): number | null {
  const prices = tokenPrices(priceFor(policies.prices, model), null);
  return estimateCost({ promptTokens, cachedTokens: 0, outputTokens }, prices).cost;
}

/**
 * Starts admission for a request whose model and exact prompt tokens are known (after tokenize); the router
 * awaits it after the lookup, which runs meanwhile. Never rejects: the limiter fails open or closed itself.
 */
export function startLimits(
  limiter: TokenLimiter,
  tenant: Tenant,
  model: string | null,
  promptTokens: number,
  maxTokens: number | null,
): Promise<RouteLimit> {
  const p = limiter.policies;
  const cost = admissionCost(p, model, promptTokens, maxTokens ?? p.default_output_tokens);
  return limiter.admit({ tenant, model, promptTokens, maxTokens, estimatedCost: cost }).then((verdict) => {
    const ticket = verdict.admitted ? verdict.ticket : null;
    return {
      verdict,
      settle: (actual) => (ticket ? limiter.settle(ticket, actual) : Promise.resolve(null)),
      release: () => (ticket ? limiter.release(ticket) : Promise.resolve(null)),
    };
  });
}
