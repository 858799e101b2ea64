// The limits in the plugin: a refused request's 429, the X-AI-RateLimit-* headers, the log phase's settle.
import type { RouteOutcome } from '../../src/router/index.js';
import type { UpstreamReport } from '../../src/router/router.js';
import { logOnce } from './log-once.js';

/** The store could not count (Redis down or slow): once in the log, whatever on_redis_error decided. */
function reportDegraded(o: RouteOutcome): void {
  const d = o.limit?.verdict.degraded;
  if (d) logOnce('limits:degraded', `token limits: ${d}`);
}

/**
 * What access does for the limits: a refused request is answered 429 (Retry-After, the X-AI-RateLimit-*
 * headers, an OpenAI-style error body); an admitted one gets its headers on the response
 * (kong.response.set_headers, one PDK call, only when a limit applied).
 */
export function limitsAnswer(
  o: RouteOutcome,
):
  | { exit: { status: number; body: string; headers: Record<string, string> } }
  | { headers: Record<string, string> | null } {
  reportDegraded(o);
  const v = o.limit?.verdict;
  if (!v) return { headers: null };
  if (!v.admitted)
    return {
      exit: {
        status: v.status,
        body: JSON.stringify({ error: { message: v.message, type: 'rate_limit_error', code: v.code } }),
        headers: { ...v.headers, 'Retry-After': String(v.retryAfterS), 'Content-Type': 'application/json' },
      },
    };
  return { headers: Object.keys(v.headers).length > 0 ? v.headers : null };
}

/**
 * The log phase ends the request's counts: an upstream failure gives everything back (the request did not
 * run); otherwise the reservation settles to the use the log phase measured (the usage record's output tokens,
 * estimated from the bytes sent for a stream, and its cost); without a usage record the reservation
 * (max_tokens or default_output_tokens, the estimated cost) stands as counted. The slot is freed either way.
 */
export async function settleLimits(
  o: RouteOutcome,
  upstream: UpstreamReport | null,
  actual: { outputTokens: number | null; cost: number | null } = { outputTokens: null, cost: null },
): Promise<void> {
  const l = o.limit;
  if (!l || !l.verdict.admitted) return;
  const failed = await (upstream?.failed ? l.release() : l.settle(actual));
  if (failed) logOnce('limits:settle', `token limits: a request's counts could not be settled: ${failed}`);
}
