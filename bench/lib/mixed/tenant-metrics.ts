// Per-tenant figures of a mixed run: TTFT p95, goodput, shed requests, accepted prompt tokens per minute.
import type { MixedRecord, MixedResult } from '../des/run-mixed.js';
import { goodputPerMin, throughputPerMin, type Slo } from '../stats/goodput.js';
import { inMeasureWindow, requestMetrics } from '../stats/metrics.js';
import { percentile } from '../stats/percentile.js';

export interface TenantFigures {
  /** Requests the tenant sent that started in the measure window. */
  sent: number;
  /** Of those, answered 429 by the gateway, by who refused them. */
  refused: Record<string, number>;
  completedPerMin: number;
  goodputPerMin: number;
  ttftP50Ms: number | null;
  ttftP95Ms: number | null;
  /** Prompt tokens the gateway let through per whole minute of the measure window (fixed windows). */
  acceptedPromptTokensPerMin: number[];
}

export function tenantFigures(r: MixedResult, tenant: string, slo: Slo): TenantFigures {
  const recs = r.records.filter((x) => x.tenant === tenant);
  const started = recs.filter((x) => x.startMs >= r.windowStartMs && x.startMs < r.windowEndMs);
  const refused: Record<string, number> = {};
  for (const x of started) if (x.rejectedBy) refused[x.rejectedBy] = (refused[x.rejectedBy] ?? 0) + 1;
  const ttfts = tenantTtfts(r, tenant);
  return {
    sent: started.length,
    refused,
    completedPerMin: throughputPerMin(recs, r.windowStartMs, r.windowEndMs),
    goodputPerMin: goodputPerMin(recs, slo, r.windowStartMs, r.windowEndMs),
    ttftP50Ms: ttfts.length ? percentile(ttfts, 0.5) : null,
    ttftP95Ms: ttfts.length ? percentile(ttfts, 0.95) : null,
    acceptedPromptTokensPerMin: acceptedPerMinute(recs, r.windowStartMs, r.windowEndMs),
  };
}

/** The tenant's TTFTs, ms, of the requests that overlap the measure window (GuideLLM's rule). */
export function tenantTtfts(r: MixedResult, tenant: string): number[] {
  return r.records
    .filter((x) => x.tenant === tenant && inMeasureWindow(x, r.windowStartMs, r.windowEndMs))
    .map((x) => requestMetrics(x)?.ttftMs)
    .filter((x): x is number => x !== undefined);
}

/** Prompt tokens of the requests the gateway forwarded, per whole clock minute inside the window. */
export function acceptedPerMinute(recs: readonly MixedRecord[], fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  for (let m = Math.ceil(fromMs / 60_000); (m + 1) * 60_000 <= toMs; m++) {
    let n = 0;
    for (const x of recs)
      if (x.rejectedBy === null && x.startMs >= m * 60_000 && x.startMs < (m + 1) * 60_000)
        n += x.promptTokens;
    out.push(n);
  }
  return out;
}

/** The fleet's busy share over the run: the sum of pod busy time over pods × run length. */
export function busyShare(r: MixedResult, durationMs: number): number {
  return r.pods.reduce((a, p) => a + p.busyMs, 0) / (r.pods.length * durationMs);
}
