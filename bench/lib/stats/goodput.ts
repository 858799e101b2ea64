import type { RequestRecord } from '../types.js';
import { requestMetrics } from './metrics.js';

/** A request meets the SLO when TTFT ≤ ttftMs and (for more than one output token) ITL ≤ itlMs. */
export interface Slo {
  ttftMs: number;
  itlMs: number;
  /** How ttftMs was set, printed with the results. */
  basis: string;
}

export function meetsSlo(r: RequestRecord, slo: Slo): boolean {
  const m = requestMetrics(r);
  if (!m) return false;
  return m.ttftMs <= slo.ttftMs && (m.itlMs === null || m.itlMs <= slo.itlMs);
}

/**
 * Goodput in requests per minute: SLO-meeting requests that COMPLETED inside the measure window, divided
 * by the window length (bench.md §1.8: counting completions avoids double-counting in-flight stragglers).
 */
export function goodputPerMin(
  records: readonly RequestRecord[],
  slo: Slo,
  windowStartMs: number,
  windowEndMs: number,
): number {
  let ok = 0;
  for (const r of records)
    if (r.endMs !== null && r.endMs >= windowStartMs && r.endMs <= windowEndMs && meetsSlo(r, slo)) ok++;
  return ok / ((windowEndMs - windowStartMs) / 60_000);
}

/** Completed requests per minute in the window, SLO or not. */
export function throughputPerMin(
  records: readonly RequestRecord[],
  windowStartMs: number,
  windowEndMs: number,
): number {
  let n = 0;
  for (const r of records)
    if (r.status === 'successful' && r.endMs !== null && r.endMs >= windowStartMs && r.endMs <= windowEndMs)
      n++;
  return n / ((windowEndMs - windowStartMs) / 60_000);
}
