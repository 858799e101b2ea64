// The plugin's access phase: read the body when allowed, route, set the target; fallbacks reported.
import { randomBytes } from 'node:crypto';
import type { PluginConfig } from '../../src/config/plugin-config.js';
import type { FallbackReason } from '../../src/core/fallback.js';
import { boundedDetail } from '../../src/core/bounded-detail.js';
import { emptyOutcome, type RouteOutcome, type Router } from '../../src/router/index.js';
import {
  ATTR_KINFERENCE_PLUGIN_ERROR,
  ATTR_KINFERENCE_TARGET,
  decisionAttributes,
  type DecisionTracer,
  type RouteSpan,
} from '../../src/telemetry/index.js';
import type { CallerFacts } from '../../src/policies/index.js';
import type { PluginMetricsRecorder } from '../../src/plugin-metrics/index.js';
import { bodyGate } from './body-gate.js';
import { callerFacts, type CallerPdk } from './caller.js';
import { gatewayOwnedHeaders, refuseHeaders } from './client-headers.js';
import { withKvReuseReport } from './kv-reuse-report.js';
import { limitsAnswer } from './limits-phase.js';
import { logOnce } from './log-once.js';
import type { PendingDecisions } from './pending.js';
import type { AccessPdk, RequestHeaders } from './pdk.js';
import { exposedHeaders, shedResponse } from './upstream-headers.js';
import { quoteHeaders, recordShed, type UsageDeps } from './usage-phase.js';

/** ctx.shared key carrying the decision id to the log phase when tracing is off. */
export const CTX_DECISION_KEY = 'kinference.decision_id';

export interface PhaseDeps {
  config: PluginConfig;
  router: Pick<Router, 'route' | 'observe'> & Partial<Pick<Router, 'waitTurn'>>;
  /** null when the config has no otlp_endpoint: then no tracing code runs at all. */
  tracer: DecisionTracer | null;
  pending: PendingDecisions;
  now: () => number;
  /** Usage records and cost quotes (policies section, src/usage); absent or null: none. */
  usage?: UsageDeps | null;
  /** Decision metrics (always on; src/plugin-metrics): absent or null only when its Redis client failed. */
  metrics?: PluginMetricsRecorder | null;
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
 * Reads the body when the headers allow it, and routes; anything unreadable keeps Kong's target. Returns the
 * body as read, for a change the outcome asks for.
 */
async function routeRequest(
  pdk: AccessPdk,
  deps: PhaseDeps,
  headers: RequestHeaders,
  callerPdk: CallerPdk | null,
): Promise<{ outcome: RouteOutcome; body: Uint8Array | string | null }> {
  // A body the plugin did not read: no model known, so Kong's target stays.
  const unread = (reason: FallbackReason, detail: string) => ({
    outcome: emptyOutcome(reason, detail),
    body: null,
  });
  const max = deps.config.max_body_bytes;
  const gate = bodyGate(headers, max);
  if (!gate.read) return unread(gate.reason, gate.detail);
  let body: Uint8Array | string | undefined;
  try {
    body = await pdk.getRawBody(max);
  } catch (e) {
    return unread('body_unreadable', `kong.request.get_raw_body failed: ${boundedDetail(e)}`);
  }
  if (body === undefined) return unread('body_unreadable', 'kong.request.get_raw_body returned no body');
  const size = typeof body === 'string' ? body.length : body.byteLength;
  if (size === 0) return unread('body_empty', 'the body is empty');
  const policies = deps.config.policies;
  if (!policies) return { outcome: await deps.router.route(body), body };
  // Policies: who the caller is (its PDK calls only when tenant_from needs them), then its class may wait.
  const caller = callerPdk
    ? await callerFacts(callerPdk, policies, headers)
    : { consumer: null, consumerGroups: [], headerTenant: null };
  return { outcome: await routeWaiting(deps, body, caller), body };
}

/** Re-decisions of one waiting request at most (each after a wake, the poll or its deadline). */
const MAX_REDECISIONS = 10_000;

/**
 * Routes with class admission's wait: a request no pod can take now waits its turn (fairness order, without
 * blocking the event loop) and re-decides until placed or its class's max_wait_ms is over (then shed or
 * served on its best pod).
 */
async function routeWaiting(
  deps: PhaseDeps,
  body: Uint8Array | string,
  caller: CallerFacts,
): Promise<RouteOutcome> {
  const { router } = deps;
  const waitTurn = router.waitTurn;
  let outcome = await router.route(body, caller, { canWait: waitTurn !== undefined });
  const startedMs = deps.now();
  for (let i = 0; outcome.admission?.action === 'wait' && waitTurn; i++) {
    const until = outcome.admission.waitUntilMs ?? 0;
    const queued = i < MAX_REDECISIONS && (await waitTurn.call(router, outcome));
    const now = deps.now();
    outcome = await router.route(body, caller, {
      waitUntilMs: queued ? until : Math.min(until, now),
      waitedMs: now - startedMs,
    });
  }
  return outcome;
}

/** JSON.parse messages quote the body: the log gets the reason and our own words only. */
const QUOTES_BODY = new Set<FallbackReason>(['body_not_json']);

/**
 * One log line per fallback reason, then a count at most once a minute (log-once.ts). Details are error
 * messages and field names, never prompt text.
 */
export function reportFallback(o: RouteOutcome, nowMs?: number): void {
  const reason = o.fallbackReason;
  if (reason === null) return;
  const detail = QUOTES_BODY.has(reason) ? 'the body is not JSON' : (o.fallbackDetail ?? '');
  const where = o.target ? `routed on load to ${o.target.podId}` : "sent to Kong's target";
  logOnce(`fallback:${reason}`, `fallback ${reason}, request ${where}${detail ? `: ${detail}` : ''}`, nowMs);
}

/**
 * The access phase. PDK round trips, in order (4 with tracing off, 5 with it, with expose_headers or to a DP
 * rank, one more with set_raw_body when the router asks the pod for reused-block reports, kv_reuse_reports_ms):
 *   [tracing on] get_headers → get_raw_body → set_target → [set_raw_body] → set_headers(traceparent[, x-data-parallel-rank][, x-kinference-*]) → ctx.shared.set
 *   [tracing off] get_headers → get_raw_body → set_target → [set_raw_body] → [set_headers(x-data-parallel-rank, x-kinference-*)] → ctx.shared.set
 * get_headers gives the traceparent and the body's size and encoding: a body that is absent, compressed,
 * chunked or over max_body_bytes is never fetched (Kong's target is kept). The decision id reaches the log
 * phase in ctx.shared.
 * Token limits (policies): a limited request adds response.set_headers (the X-AI-RateLimit-* family) after
 * get_raw_body; one over a limit, cap or budget is get_headers → get_raw_body → response.exit(429).
 * With a policies section that prices the model and quote_cost on, the x-kinference-cost-estimate header
 * (usage-phase.ts) goes in that same response.set_headers; its failure is logged and ignored.
 * Shedding: get_headers → get_raw_body → response.exit(429). The router never throws; the caller catches
 * anything else and lets the request through (fail open).
 * Client-sent x-data-parallel-rank and x-kinference-* headers cost one clear_header each before set_target,
 * and so does a tracestate whose traceparent we did not continue (client-headers.ts; docs/security.md).
 */
export async function runAccess(
  pdk: AccessPdk,
  deps: PhaseDeps,
  callerPdk: CallerPdk | null = null,
): Promise<void> {
  const { config, tracer } = deps;
  const startMs = deps.now();
  const headers = await pdk.getHeaders();
  const owned = gatewayOwnedHeaders(headers);
  const refused = refuseHeaders(headers, owned);
  if (refused) {
    logOnce(`refused:${refused.status}`, `request refused with ${refused.status}: ${refused.body}`);
    pdk.exit(refused.status, refused.body, refused.headers);
    return;
  }
  // W3C Trace Context: a request carrying several traceparent headers has none we can trust (new trace).
  const tp = headers.traceparent;
  const incoming = tracer && tp?.length === 1 ? tp[0] : undefined;
  const { outcome, body } = await routeRequest(pdk, deps, headers, callerPdk);
  reportFallback(outcome);
  deps.metrics?.decision(outcome);
  const span = tracer ? startSpan(tracer, incoming, startMs, decisionAttributes(outcome)) : null;
  let targetSet = false;
  /** The log phase will find this decision (it is in `pending` and its id in ctx.shared). */
  let remembered = false;
  let pendingId: string | null = null;
  try {
    const limits = limitsAnswer(outcome);
    if ('exit' in limits) {
      pdk.exit(limits.exit.status, limits.exit.body, limits.exit.headers);
      return;
    }
    if (outcome.shed) {
      if (deps.usage) recordShed(deps.usage, outcome, deps.now());
      const r = shedResponse({ ...outcome, shed: outcome.shed });
      pdk.exit(r.status, r.body, { ...limits.headers, ...r.headers });
      return;
    }
    // The limit headers and the cost quote: one set_headers. Its failure costs the client those headers, not
    // the routing decision.
    const responseHeaders = {
      ...limits.headers,
      ...(deps.usage ? quoteHeaders(deps.usage, outcome, span) : {}),
    };
    if (Object.keys(responseHeaders).length > 0)
      await pdk
        .setResponseHeaders(responseHeaders)
        .catch((e: unknown) =>
          logOnce('response-headers', `response headers not sent (the request goes on): ${boundedDetail(e)}`),
        );
    // Cleared before set_target: if a later call fails, the request passes through without them too. A
    // tracestate belongs to the traceparent it came with: when we start a new trace (none, several or an
    // invalid one), it would describe a trace the pod is no longer part of (W3C Trace Context §3.3.1).
    const clear = owned;
    if (span && headers.tracestate && span.ref.traceId !== incoming?.split('-')[1]) clear.push('tracestate');
    for (const name of clear) await pdk.clearUpstreamHeader(name);
    if (outcome.target) {
      await pdk.setTarget(outcome.target.host, outcome.target.port);
      targetSet = true;
      const reported = outcome.kvReuseReport && body !== null ? withKvReuseReport(body) : null;
      if (reported) await pdk.setUpstreamBody(reported);
    }
    const upstreamHeaders: Record<string, string> = {};
    if (outcome.target?.dataParallelRank !== undefined)
      upstreamHeaders['x-data-parallel-rank'] = String(outcome.target.dataParallelRank);
    if (span) upstreamHeaders.traceparent = span.traceparent;
    if (config.expose_headers) Object.assign(upstreamHeaders, exposedHeaders(outcome));
    if (Object.keys(upstreamHeaders).length > 0) await pdk.setUpstreamHeaders(upstreamHeaders);

    // Remember the decision for the log phase: when there is a pod to learn about, or a span to extend. Its
    // id goes in ctx.shared with tracing on too: a later plugin may replace the traceparent we send (Kong's
    // opentelemetry plugin injects its own), and a decision the log phase cannot find never gives back its
    // reservation and ITL record.
    if (outcome.target || span || outcome.limit) {
      pendingId = span ? span.ref.spanId : randomBytes(8).toString('hex');
      const router = deps.router;
      deps.pending.put(pendingId, {
        outcome,
        span: span?.ref ?? null,
        accessEndMs: deps.now(),
        // Without its log phase, the reservation and ITL record end when the decision is dropped.
        release: () => {
          router.observe(outcome, null);
          void outcome.limit?.settle({ outputTokens: null, cost: null });
        },
      });
      await pdk.ctxSharedSet(CTX_DECISION_KEY, pendingId);
      remembered = true;
    }
  } catch (e) {
    // The log phase will not find this decision (set_target never took, or a call after it failed): release
    // its reservation and ITL record now.
    if ((outcome.target || outcome.limit) && !remembered) {
      if (pendingId !== null) deps.pending.take(pendingId);
      deps.router.observe(outcome, null);
      void outcome.limit?.release();
    }
    // The caller fails open; the span must not claim a pod Kong will not use, nor look like a success.
    if (span) {
      span.setAttributes({
        [ATTR_KINFERENCE_PLUGIN_ERROR]: boundedDetail(e),
        [ATTR_KINFERENCE_TARGET]: targetSet ? 'pod' : 'kong-default',
      });
      span.fail(e);
    }
    throw e;
  } finally {
    // Ended after the access step has answered Kong: the span that fills an export batch serializes it.
    if (span) {
      const endMs = deps.now();
      setImmediate(() => span.end(endMs));
    }
  }
}
