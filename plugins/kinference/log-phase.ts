import * as A from '../../src/telemetry/attributes.js';
import { parseTraceparent } from '../../src/telemetry/index.js';
import { CTX_DECISION_KEY, type PhaseDeps } from './access.js';
import type { LogPdk } from './pdk.js';

/** The fields of kong.log.serialize() the log phase reads. */
interface Serialized {
  latencies?: { proxy?: number };
  upstream_status?: string;
  response?: { status?: number; headers?: Record<string, string | string[]> };
  request?: { headers?: Record<string, string | string[]> };
}

function header(h: Record<string, string | string[]> | undefined, name: string): string | undefined {
  const v = h?.[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The log phase (Kong runs it after the response, off the request path): take Kong's measured
 * latencies.proxy — request sent → first response byte, ≈ TTFT for a streamed response whose headers leave
 * with the first token — and feed it to the router's online calibration; with tracing on, add a
 * `kinference.ttft` span under the decision span. One PDK call (serialize) with tracing on, two without.
 */
export async function runLog(pdk: LogPdk, deps: PhaseDeps): Promise<void> {
  const raw = await pdk.serialize();
  if (raw === undefined) return;
  const s = JSON.parse(raw) as Serialized;
  let id: string | undefined;
  if (deps.tracer) id = parseTraceparent(header(s.request?.headers, 'traceparent'))?.spanId;
  else {
    const v = await pdk.ctxSharedGet(CTX_DECISION_KEY);
    id = typeof v === 'string' ? v : undefined;
  }
  if (id === undefined) return;
  const p = deps.pending.take(id);
  if (!p) return;

  const actualMs = s.latencies?.proxy;
  // ngx.var.upstream_status lists every try ("502, 200"); the last one answered the client.
  const upstreamStatus =
    s.upstream_status === undefined ? undefined : Number(String(s.upstream_status).split(',').pop()!.trim());
  const streaming = /^text\/event-stream/i.test(header(s.response?.headers, 'content-type') ?? '');
  const measured = typeof actualMs === 'number' && actualMs >= 0;
  // Non-streamed responses put the whole generation before the first byte: not a TTFT.
  const observe = measured && streaming && upstreamStatus === 200 && p.outcome.target !== null;
  // Every outcome releases its reservation; only a streamed first byte is a TTFT worth learning from.
  deps.router.observe(p.outcome, observe ? actualMs : null);

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
    deps.tracer.recordTtft(p.span, p.accessEndMs, p.accessEndMs + actualMs, attrs);
  }
}
