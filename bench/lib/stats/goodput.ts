// Goodput: the SLO-meeting requests completed in the measure window, per minute.
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
 * The requests goodput counts: those that COMPLETED inside the measure window (bench.md §1.8: counting
 * completions avoids double-counting in-flight stragglers), each true when it met the SLO.
 */
export function goodputIndicators(
  records: readonly RequestRecord[],
  slo: Slo,
  windowStartMs: number,
  windowEndMs: number,
): boolean[] {
  return records
    .filter((r) => r.endMs !== null && r.endMs >= windowStartMs && r.endMs <= windowEndMs)
    .map((r) => meetsSlo(r, slo));
}

/** Goodput in requests per minute: the SLO-meeting completions, divided by the window length. */
export function goodputPerMin(
  records: readonly RequestRecord[],
  slo: Slo,
  windowStartMs: number,
  windowEndMs: number,
): number {
  const ok = goodputIndicators(records, slo, windowStartMs, windowEndMs).filter(Boolean).length;
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
