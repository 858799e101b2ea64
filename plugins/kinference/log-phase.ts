// The plugin's log phase: the measured TTFT and the upstream's answer fed back to the router.
import * as A from '../../src/telemetry/attributes.js';
import type { UpstreamReport } from '../../src/router/router.js';
import { CTX_DECISION_KEY, type PhaseDeps } from './access.js';
import { settleLimits } from './limits-phase.js';
import type { LogPdk } from './pdk.js';
import { recordUsage, usageSpanAttributes } from './usage-phase.js';

/** The fields of kong.log.serialize() the log phase reads. */
export interface Serialized {
  latencies?: { proxy?: number };
  upstream_status?: string;
  /** size: nginx's $bytes_sent (status line, headers, chunked framing, body). */
  response?: { status?: number; size?: number; headers?: Record<string, string | string[]> };
  request?: { headers?: Record<string, string | string[]> };
  /** One entry per balancer try; a retried try gets state/code, the last one only on a 5xx with no retry left. */
  tries?: { ip?: string; port?: number; state?: string; code?: number }[];
}

/** nginx's own status for a failed connection (502) or timeout (504), or a gateway error from the pod. */
const GATEWAY_ERRORS = new Set([502, 503, 504]);

/** ngx.var.upstream_status lists every try ("502, 200", "502 : 200" across redirects): the last answered. */
function lastUpstreamStatus(v: string | undefined): number | undefined {
  const last = String(v ?? '')
    .split(/[,:]/)
    .pop()!
    .trim();
  const n = last === '' ? NaN : Number(last);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/**
 * What the pod the plugin chose did with the request, for the router's passive health. Kong puts the
 * status nginx recorded in `upstream_status` (502 when the connection failed, 504 on a timeout, else what
 * the pod answered; kong/pdk/log.lua); were it empty, the last try's `state: "failed"` still tells.
 * No try at all: the request never left Kong (another plugin answered it), so nothing is known.
 */
export function upstreamReport(s: Serialized): UpstreamReport | null {
  const tries = Array.isArray(s.tries) ? s.tries : [];
  const last = tries[tries.length - 1];
  if (!last) return null;
  const status = lastUpstreamStatus(s.upstream_status);
  if (status !== undefined)
    return GATEWAY_ERRORS.has(status)
      ? { failed: true, detail: `gateway error ${status}` }
      : { failed: false, detail: `answered ${status}` };
  if (last.state === 'failed')
    return { failed: true, detail: `connection failed (${last.code ?? s.response?.status ?? 502})` };
  return null;
}

function header(h: Record<string, string | string[]> | undefined, name: string): string | undefined {
  const v = h?.[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The log phase (Kong runs it after the response, off the request path): take Kong's measured
 * latencies.proxy — request sent → first response byte, ≈ TTFT for a streamed response whose headers leave
 * with the first token — and feed it to the router's online calibration; with tracing on, add a
 * `kinference.ttft` span under the decision span. Two PDK calls: serialize, and ctx.shared.get for the decision.
 */
export async function runLog(pdk: LogPdk, deps: PhaseDeps): Promise<void> {
  const raw = await pdk.serialize();
  if (raw === undefined) return;
  const s = JSON.parse(raw) as Serialized;
  const id = await pdk.ctxSharedGet(CTX_DECISION_KEY);
  if (typeof id !== 'string') return;
  const p = deps.pending.take(id);
  if (!p) return;

  const actualMs = s.latencies?.proxy;
  const upstreamStatus = lastUpstreamStatus(s.upstream_status);
  const streaming = /^text\/event-stream/i.test(header(s.response?.headers, 'content-type') ?? '');
  const measured = typeof actualMs === 'number' && actualMs >= 0;
  // Non-streamed responses put the whole generation before the first byte: not a TTFT.
  const observe = measured && streaming && upstreamStatus === 200 && p.outcome.target !== null;
  // Every outcome releases its reservation; only a streamed first byte is a TTFT worth learning from; a
  // failed connection or gateway error keeps the pod out of the next decisions for a while.
  const report = p.outcome.target ? upstreamReport(s) : null;
  deps.router.observe(p.outcome, observe ? actualMs : null, report);
  if (observe) deps.metrics?.ttft(p.outcome, actualMs);
  const usage = deps.usage ? recordUsage(deps.usage, p.outcome, s, deps.now()) : null;
  await settleLimits(p.outcome, p.outcome.target ? report : upstreamReport(s), {
    outputTokens: usage?.output?.tokens ?? null,
    cost: usage?.cost.cost ?? null,
  });

  if (deps.tracer && p.span && measured) {
    const predicted = p.outcome.decision.chosen?.predictedTtftMs;
    const attrs: Record<string, string | number | boolean> = {
      [A.ATTR_KINFERENCE_TTFT_ACTUAL_MS]: actualMs,
      [A.ATTR_KINFERENCE_TTFT_OBSERVED]: observe,
    };
    if (predicted !== undefined) {
      attrs[A.ATTR_KINFERENCE_TTFT_PREDICTED_MS] = Math.round(predicted * 1000) / 1000;
      attrs[A.ATTR_KINFERENCE_TTFT_ERROR_MS] = Math.round((actualMs - predicted) * 1000) / 1000;
    }
    if (upstreamStatus !== undefined && Number.isFinite(upstreamStatus))
      attrs[A.ATTR_HTTP_RESPONSE_STATUS_CODE] = upstreamStatus;
    if (p.outcome.target) attrs[A.ATTR_KINFERENCE_CHOSEN_POD_ID] = p.outcome.target.podId;
    if (usage) Object.assign(attrs, usageSpanAttributes(usage));
    // A gateway error from the chosen pod is an error in Jaeger too, not just a status code to look for.
    const error = report?.failed ? report.detail : undefined;
    deps.tracer.recordTtft(p.span, p.accessEndMs, p.accessEndMs + actualMs, attrs, error);
  }
}
