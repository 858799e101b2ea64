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
  /**
   * The plugin's access phase alone, as the gateway waited for it (RPC included, the pods' queues not):
   * where a Redis fault's cost shows, to hold against redis_timeout_ms. Null without the gateway's timings.
   */
  access: {
    baseline: Spread;
    during: Spread;
    addedP50Ms: number;
    addedP99Ms: number;
    /**
     * The plugin's index lookup step inside those access phases (x-kinference-route-timings): the part a Redis
     * fault can lengthen, and what `redis_timeout_ms` bounds. Requests that did not reach a lookup not counted.
     */
    lookup: { baseline: Spread; during: Spread };
  } | null;
  /** From the end of the fault until requests get ≥ 90% of the baseline's cached prompt share (null: not in time). */
  recoveryS: number | null;
  /** Faults that lose the index: seconds from the end of the fault until it holds ≥ 90% of its keys again. */
  indexRefillS?: number | null;
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

/** p50, p99 and max of a set of durations, ms, and how many. */
export interface Spread {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  requests: number;
}

function spread(ms: readonly number[]): Spread {
  return {
    p50Ms: percentile([...ms], 50),
    p99Ms: percentile([...ms], 99),
    maxMs: ms.length ? Math.max(...ms) : NaN,
    requests: ms.length,
  };
}

/** Access phases (GatewayStats.accessTimes) that ended in [from, to): their durations and their lookups'. */
function accessWindow(
  times: readonly AccessTime[],
  fromEpochMs: number,
  toEpochMs: number,
): { access: Spread; lookup: Spread } {
  const inside = times.filter(([at]) => at >= fromEpochMs && at < toEpochMs);
  const lookups = inside.map(([, , l]) => l).filter((l): l is number => typeof l === 'number');
  return { access: spread(inside.map(([, d]) => d)), lookup: spread(lookups) };
}

/** One access phase: when it ended (epoch ms), its duration and its lookup step's (ms; null: no lookup). */
export type AccessTime = readonly [endEpochMs: number, ms: number, lookupMs?: number | null];

export function figures(
  fault: string,
  rs: readonly RequestRecord[],
  t: { baselineFromMs: number; injectMs: number; recoveredMs: number; endMs: number },
  extra: {
    kongStartInstance500: number;
    fallbacks: string[];
    qualityRun: number;
    /** The gateway's access-phase timings (GatewayStats.accessTimes) and the traffic's epoch start. */
    access?: { times: readonly AccessTime[]; t0: number };
  },
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
  const a = extra.access;
  const access = a
    ? (() => {
        // By when the phase ended: one that began before the fault and waited through it is the fault's.
        const before = accessWindow(a.times, a.t0 + t.baselineFromMs, a.t0 + t.injectMs);
        const dur = accessWindow(a.times, a.t0 + t.injectMs, a.t0 + t.recoveredMs);
        return {
          baseline: before.access,
          during: dur.access,
          addedP50Ms: dur.access.p50Ms - before.access.p50Ms,
          addedP99Ms: dur.access.p99Ms - before.access.p99Ms,
          lookup: { baseline: before.lookup, during: dur.lookup },
        };
      })()
    : null;
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
    access,
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
