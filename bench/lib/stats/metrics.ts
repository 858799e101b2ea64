// GuideLLM's per-request metrics (TTFT, ITL, latency), its measure-window rule and summaries.
import type { RequestRecord } from '../types.js';
import { summarize, type DistributionSummary } from './percentile.js';

/**
 * GuideLLM's per-request metrics (guidellm schemas/request_stats.py), from client-side timestamps:
 *   TTFT = first − start;  ITL = (last − first)/(out − 1), undefined for out ≤ 1;
 *   TPOT = (last − start)/out (includes TTFT);  E2E = end − start.
 */
export interface RequestMetrics {
  ttftMs: number;
  itlMs: number | null;
  tpotMs: number;
  e2eMs: number;
}

export function requestMetrics(r: RequestRecord): RequestMetrics | null {
  if (r.status !== 'successful' || r.firstTokenMs === null || r.lastTokenMs === null || r.endMs === null)
    return null;
  return {
    ttftMs: r.firstTokenMs - r.startMs,
    itlMs: r.outputTokens > 1 ? (r.lastTokenMs - r.firstTokenMs) / (r.outputTokens - 1) : null,
    tpotMs: r.outputTokens > 0 ? (r.lastTokenMs - r.startMs) / r.outputTokens : Number.NaN,
    e2eMs: r.endMs - r.startMs,
  };
}

/**
 * GuideLLM's inclusion rule (GenerativeRequestsAccumulator.get_within_range): a request counts when it
 * overlaps the measure window, i.e. end ≥ windowStart and start ≤ windowEnd. Only successful requests.
 */
export function inMeasureWindow(r: RequestRecord, windowStartMs: number, windowEndMs: number): boolean {
  return (
    r.status === 'successful' && r.endMs !== null && r.endMs >= windowStartMs && r.startMs <= windowEndMs
  );
}

/**
 * Requests that failed within the measure window (the gateway's 429s among them): GuideLLM reports its
 * errored requests with the same overlap rule as the successful ones (get_within_range on each list).
 */
export function erroredInWindow(
  records: readonly RequestRecord[],
  windowStartMs: number,
  windowEndMs: number,
): RequestRecord[] {
  return records.filter(
    (r) => r.status === 'errored' && r.endMs !== null && r.endMs >= windowStartMs && r.startMs <= windowEndMs,
  );
}

export interface MetricSummaries {
  ttft_ms: DistributionSummary;
  /** Weighted by output_tokens − 1, as GuideLLM does. */
  itl_ms: DistributionSummary;
  /** Weighted by output_tokens. */
  tpot_ms: DistributionSummary;
  e2e_ms: DistributionSummary;
  prompt_tokens: DistributionSummary;
  cached_tokens: DistributionSummary;
}

export function summarizeRequests(records: readonly RequestRecord[]): MetricSummaries {
  const ttft: number[] = [];
  const itl: number[] = [];
  const itlW: number[] = [];
  const tpot: number[] = [];
  const tpotW: number[] = [];
  const e2e: number[] = [];
  const prompt: number[] = [];
  const cached: number[] = [];
  for (const r of records) {
    const m = requestMetrics(r);
    if (!m) continue;
    ttft.push(m.ttftMs);
    if (m.itlMs !== null) {
      itl.push(m.itlMs);
      itlW.push(r.outputTokens - 1);
    }
    tpot.push(m.tpotMs);
    tpotW.push(r.outputTokens);
    e2e.push(m.e2eMs);
    prompt.push(r.promptTokens);
    cached.push(r.cachedTokens);
  }
  return {
    ttft_ms: summarize(ttft),
    itl_ms: summarize(itl, itlW),
    tpot_ms: summarize(tpot, tpotW),
    e2e_ms: summarize(e2e),
    prompt_tokens: summarize(prompt),
    cached_tokens: summarize(cached),
  };
}
