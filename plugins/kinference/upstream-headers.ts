// The x-kinference-* debugging headers (expose_headers) and the 429 answer when shedding.
import type { RouteOutcome } from '../../src/router/index.js';

/** The x-kinference-* debugging headers (only with expose_headers): what was chosen and why. */
export function exposedHeaders(o: RouteOutcome): Record<string, string> {
  const h: Record<string, string> = {
    'x-kinference-prompt-tokens': String(o.promptTokens),
    'x-kinference-route-ms': o.timings.totalMs.toFixed(3),
    // Where the route's time went (with decision workers, parse counts the hand-over and the pool's queue).
    'x-kinference-route-timings': routeTimings(o.timings),
  };
  const chosen = o.decision.chosen;
  if (o.target) h['x-kinference-pod'] = o.target.podId;
  if (chosen) {
    h['x-kinference-predicted-ttft-ms'] = chosen.predictedTtftMs.toFixed(1);
    h['x-kinference-cached-tokens'] = String(chosen.cachedTokens);
  }
  if (o.fallbackReason) h['x-kinference-fallback'] = o.fallbackReason;
  if (o.tenant) {
    h['x-kinference-tenant'] = o.tenant.name;
    h['x-kinference-class'] = o.tenant.serviceClass.name;
  }
  if (o.admission) h['x-kinference-class-admission'] = o.admission.action;
  return h;
}

/** `parse=…;template=…;tokenize=…;keys=…;lookup=…;predict=…`, ms with 3 decimals. */
function routeTimings(t: RouteOutcome['timings']): string {
  const steps = ['parse', 'template', 'tokenize', 'keys', 'lookup', 'predict'] as const;
  return steps.map((k) => `${k}=${t[`${k}Ms`].toFixed(3)}`).join(';');
}

/** The 429 answer when shedding (opt-in): an OpenAI-style error body, with Retry-After. */
export function shedResponse(o: RouteOutcome & { shed: NonNullable<RouteOutcome['shed']> }): {
  status: number;
  body: string;
  headers: Record<string, string>;
} {
  if (o.shed.byClass && o.admission) return classShedResponse(o, o.admission, o.shed.byClass.waitedMs);
  const chosen = o.decision.chosen;
  // The ITL guard refused every pod, or the best pod's TTFT is over the bound: say which.
  const itl = chosen?.withinItl === false;
  const ms = (x: number | null | undefined): string =>
    x === null || x === undefined ? '' : Number.isFinite(x) ? ` (best ${Math.round(x)} ms)` : '';
  const message = itl
    ? `every pod is at its ITL bound or KV capacity${ms(chosen?.predictedItlMs)}; retry later`
    : `every pod is predicted over the TTFT SLO${ms(chosen?.predictedTtftMs)}; retry later`;
  return {
    status: o.shed.status,
    body: JSON.stringify({
      error: { message, type: 'rate_limit_error', code: itl ? 'itl_slo_exceeded' : 'ttft_slo_exceeded' },
    }),
    headers: { 'Retry-After': String(o.shed.retryAfterS), 'Content-Type': 'application/json' },
  };
}

/**
 * The 429 of a sheddable class no pod could take without pushing a higher class past its TTFT objective
 * (policies): OpenAI's error shape, type server_overloaded, with Retry-After.
 */
function classShedResponse(
  o: RouteOutcome & { shed: NonNullable<RouteOutcome['shed']> },
  a: NonNullable<RouteOutcome['admission']>,
  waitedMs: number,
): { status: number; body: string; headers: Record<string, string> } {
  const waited = waitedMs > 0 ? ` after waiting ${Math.round(waitedMs)} ms` : '';
  const message =
    `the fleet is serving higher-priority traffic: no pod can take a request of class "${a.className}" ` +
    `(priority ${a.priority}) without pushing a higher class past its TTFT objective${waited}; ` +
    `retry after ${o.shed.retryAfterS} s`;
  return {
    status: o.shed.status,
    body: JSON.stringify({
      error: { message, type: 'server_overloaded', param: null, code: 'class_overloaded' },
    }),
    headers: { 'Retry-After': String(o.shed.retryAfterS), 'Content-Type': 'application/json' },
  };
}
