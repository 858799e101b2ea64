import type { RouteOutcome } from '../../src/router/index.js';

/** The x-kinference-* debugging headers (only with expose_headers): what was chosen and why. */
export function exposedHeaders(o: RouteOutcome): Record<string, string> {
  const h: Record<string, string> = {
    'x-kinference-prompt-tokens': String(o.promptTokens),
    'x-kinference-route-ms': o.timings.totalMs.toFixed(3),
  };
  const chosen = o.decision.chosen;
  if (o.target) h['x-kinference-pod'] = o.target.podId;
  if (chosen) {
    h['x-kinference-predicted-ttft-ms'] = chosen.predictedTtftMs.toFixed(1);
    h['x-kinference-cached-tokens'] = String(chosen.cachedTokens);
  }
  if (o.fallbackReason) h['x-kinference-fallback'] = o.fallbackReason;
  return h;
}

/** The 429 answer when shedding (opt-in): an OpenAI-style error body, with Retry-After. */
export function shedResponse(o: RouteOutcome & { shed: NonNullable<RouteOutcome['shed']> }): {
  status: number;
  body: string;
  headers: Record<string, string>;
} {
  const best = o.decision.chosen?.predictedTtftMs;
  return {
    status: o.shed.status,
    body: JSON.stringify({
      error: {
        message: `every pod is predicted over the TTFT SLO${best === undefined ? '' : ` (best ${Math.round(best)} ms)`}; retry later`,
        type: 'rate_limit_error',
        code: 'ttft_slo_exceeded',
      },
    }),
    headers: { 'Retry-After': String(o.shed.retryAfterS), 'Content-Type': 'application/json' },
  };
}
