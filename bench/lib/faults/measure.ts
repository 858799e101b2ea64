// Figures of one fault from the client's records: failures, added latency, time until cache hits are back.
import type { RequestRecord } from './traffic.js';

export interface FaultFigures {
  fault: string;
  /** Requests started from the fault's start until the end of its observation. */
  requests: number;
  failed: number;
  /** Failed requests by cause (HTTP status or error kind). */
  failures: Record<string, number>;
  /** Kong's documented 500 before an instance exists (StartInstance failed while the server restarted). */
  kongStartInstance500: number;
  faultS: number;
  baseline: { p50Ms: number; p99Ms: number; cacheRatio: number; requests: number };
  during: { p50Ms: number; p99Ms: number; cacheRatio: number; requests: number };
  addedP50Ms: number;
  addedP99Ms: number;
  /** From the end of the fault until requests get ≥ 90% of the baseline's cached prompt share (null: not in time). */
  recoveryS: number | null;
  /** The plugin's fallback lines the stand-in logged during the fault. */
  fallbacks: string[];
}

export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

export function cacheRatio(rs: readonly RequestRecord[]): number {
  let c = 0;
  let p = 0;
  for (const r of rs)
    if (r.ok) {
      c += r.cachedTokens;
      p += r.promptTokens;
    }
  return p > 0 ? c / p : NaN;
}

function window(rs: readonly RequestRecord[]): {
  p50Ms: number;
  p99Ms: number;
  cacheRatio: number;
  requests: number;
} {
  const lat = rs.filter((r) => r.ok).map((r) => r.endMs - r.startMs);
  return {
    p50Ms: percentile(lat, 50),
    p99Ms: percentile(lat, 99),
    cacheRatio: cacheRatio(rs),
    requests: rs.length,
  };
}

/**
 * The first time after `fromMs` from which a run of `n` consecutive requests (by start) reaches `target` of
 * cached prompt tokens: the start of that run. Null when none does.
 */
export function qualityBackAt(
  rs: readonly RequestRecord[],
  fromMs: number,
  target: number,
  n: number,
): number | null {
  const after = rs.filter((r) => r.startMs >= fromMs && r.ok).sort((a, b) => a.startMs - b.startMs);
  for (let i = 0; i + n <= after.length; i++)
    if (cacheRatio(after.slice(i, i + n)) >= target) return after[i]!.startMs;
  return null;
}

export function figures(
  fault: string,
  rs: readonly RequestRecord[],
  t: { baselineFromMs: number; injectMs: number; recoveredMs: number; endMs: number },
  extra: { kongStartInstance500: number; fallbacks: string[]; qualityRun: number },
): FaultFigures {
  const base = window(rs.filter((r) => r.startMs >= t.baselineFromMs && r.startMs < t.injectMs));
  const during = window(rs.filter((r) => r.startMs >= t.injectMs && r.startMs < t.recoveredMs));
  const affected = rs.filter((r) => r.startMs >= t.injectMs && r.startMs < t.endMs);
  // A request in flight when the fault began belongs to it too.
  const inFlight = rs.filter((r) => r.startMs < t.injectMs && r.endMs >= t.injectMs);
  const failedRs = [...affected, ...inFlight].filter((r) => !r.ok);
  const failures: Record<string, number> = {};
  for (const r of failedRs) {
    // A 200 whose stream ended early: the pod died with the request in flight.
    const k =
      r.status === 200 ? 'stream cut' : r.status ? `HTTP ${r.status}` : (r.error ?? 'error').split(':')[0]!;
    failures[k] = (failures[k] ?? 0) + 1;
  }
  const back = qualityBackAt(rs, t.recoveredMs, 0.9 * base.cacheRatio, extra.qualityRun);
  return {
    fault,
    requests: affected.length,
    failed: failedRs.length,
    failures,
    kongStartInstance500: extra.kongStartInstance500,
    faultS: (t.recoveredMs - t.injectMs) / 1000,
    baseline: base,
    during,
    addedP50Ms: during.p50Ms - base.p50Ms,
    addedP99Ms: during.p99Ms - base.p99Ms,
    recoveryS: back === null ? null : Math.max(0, back - t.recoveredMs) / 1000,
    fallbacks: extra.fallbacks,
  };
}

/** Least-squares slope of y over x (per unit of x). */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? NaN : num / den;
}
