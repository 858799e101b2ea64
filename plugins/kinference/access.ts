import { randomBytes } from 'node:crypto';
import type { PluginConfig } from '../../src/config/plugin-config.js';
import type { Router } from '../../src/router/index.js';
import { decisionAttributes, type DecisionTracer, type RouteSpan } from '../../src/telemetry/index.js';
import { logOnce } from './log-once.js';
import type { PendingDecisions } from './pending.js';
import type { AccessPdk } from './pdk.js';
import { exposedHeaders, shedResponse } from './upstream-headers.js';

/** ctx.shared key carrying the decision id to the log phase when tracing is off. */
export const CTX_DECISION_KEY = 'kinference.decision_id';

export interface PhaseDeps {
  config: PluginConfig;
  router: Pick<Router, 'route' | 'observe'>;
  /** null when the config has no otlp_endpoint: then no tracing code runs at all. */
  tracer: DecisionTracer | null;
  pending: PendingDecisions;
  now: () => number;
}

function startSpan(
  tracer: DecisionTracer,
  traceparent: string | undefined,
  startMs: number,
  attrs: ReturnType<typeof decisionAttributes>,
): RouteSpan | null {
  try {
    return tracer.startRoute(traceparent, startMs, attrs);
  } catch (e) {
    logOnce('tracer', `tracing failed, continuing without a span: ${String(e)}`);
    return null;
  }
}

/**
 * The access phase. PDK round trips, in order (≤ 4 on every path):
 *   [tracing on] get_header(traceparent) → get_raw_body → set_target → set_headers(traceparent[, x-kinference-*])
 *   [tracing off] get_raw_body → set_target → [set_headers(x-kinference-*)] → ctx.shared.set(decision id)
 * The decision id reaches the log phase inside the traceparent we already send (tracing on), so no
 * ctx.shared call is needed then. Shedding: get_raw_body → response.exit(429). The router never throws; the
 * caller catches anything else and lets the request through (fail open).
 */
export async function runAccess(pdk: AccessPdk, deps: PhaseDeps): Promise<void> {
  const { config, tracer } = deps;
  const startMs = deps.now();
  const incoming = tracer ? await pdk.getHeader('traceparent') : undefined;
  const body = await pdk.getRawBody();
  const outcome = await deps.router.route(body ?? '');
  const span = tracer ? startSpan(tracer, incoming, startMs, decisionAttributes(outcome)) : null;
  try {
    if (outcome.shed) {
      const r = shedResponse({ ...outcome, shed: outcome.shed });
      pdk.exit(r.status, r.body, r.headers);
      return;
    }
    if (outcome.target) await pdk.setTarget(outcome.target.host, outcome.target.port);
    const headers: Record<string, string> = {};
    if (span) headers.traceparent = span.traceparent;
    if (config.expose_headers) Object.assign(headers, exposedHeaders(outcome));
    if (Object.keys(headers).length > 0) await pdk.setUpstreamHeaders(headers);

    // Remember the decision for the log phase: when there is a pod to learn about, or a span to extend.
    if (outcome.target || span) {
      const id = span ? span.ref.spanId : randomBytes(8).toString('hex');
      deps.pending.put(id, { outcome, span: span?.ref ?? null, accessEndMs: deps.now() });
      if (!span) await pdk.ctxSharedSet(CTX_DECISION_KEY, id);
    }
  } finally {
    span?.end(deps.now());
  }
}
