// Analyses a benchmark run: per-cell comparisons with the random arm, goodput, checks against targets.
import {
  bootstrapQuantileChange,
  bootstrapRateRatio,
  type QuantileChange,
  type RatioEstimate,
} from '../stats/bootstrap.js';
import { goodputIndicators, goodputPerMin, throughputPerMin, type Slo } from '../stats/goodput.js';
import {
  erroredInWindow,
  inMeasureWindow,
  requestMetrics,
  summarizeRequests,
  type MetricSummaries,
} from '../stats/metrics.js';
import { latencyProfile, type BenchSchedule } from '../schedule.js';
import { profileLabel, type ArmName, type Profile, type RequestRecord, type WorkloadName } from '../types.js';
import type { CellOutput } from '../des/worker.js';

/** Published random-arm and kinference figures (docs/benchmark.md "Results", column "published"), seconds. */
export const PUBLISHED = {
  control: { random: { median: 6.92, p95: 21.5 }, kinference: { median: 6.83, p95: 12.3 } },
  'shared-prefix': { random: { median: 6.88, p95: 18.3 }, kinference: { median: 0.31, p95: 9.2 } },
  multiturn: { random: { median: 1.7, p95: 12.8 }, kinference: { median: 0.59, p95: 7.7 } },
  goodputRatio: { 'shared-prefix': 7.4, multiturn: 3.5 },
} as const;

export interface CellGroup {
  workload: WorkloadName;
  profile: string;
  arm: ArmName;
  trials: number;
  requests: number;
  incomplete: number;
  /** Requests started in the measure window that failed: with kinference-slo, the gateway's 429s. */
  errored: number;
  summary: MetricSummaries;
  goodputPerMin: number;
  throughputPerMin: number;
  /** Share of requests served with a prefix hit of at least half their prompt. */
  hitRate: number;
  wallMs: number;
  fallbacks: Record<string, number>;
  indexStats: Record<string, number>;
}

export interface Comparison {
  workload: WorkloadName;
  profile: string;
  arm: ArmName;
  paired: boolean;
  ttft: { median: QuantileChange; p95: QuantileChange };
  itl: { median: QuantileChange };
  e2e: { median: QuantileChange };
}

export interface GoodputRow {
  workload: WorkloadName;
  arm: ArmName;
  byConcurrency: Record<string, number>;
  peakConcurrency: number;
  peak: number;
  /** Peak goodput vs random's peak (each arm at its own best concurrency), bootstrap CI over trials. */
  vsRandom: RatioEstimate | null;
  /** Goodput at the peak load (the highest concurrency) vs random's at the same load. */
  peakLoad: number;
  vsRandomAtPeakLoad: RatioEstimate | null;
}

export interface TargetCheck {
  name: string;
  target: string;
  measured: string;
  met: boolean;
}

export interface BenchResults {
  schedule: BenchSchedule;
  slo: Record<WorkloadName, Slo>;
  groups: CellGroup[];
  comparisons: Comparison[];
  goodput: GoodputRow[];
  targets: TargetCheck[];
  calibration: {
    workload: WorkloadName;
    metric: string;
    published: number;
    measured: number;
    withinTolerance: boolean;
  }[];
  /** TTFT CDF points per workload/arm at the latency profile (s), for the charts. */
  cdf: { workload: WorkloadName; arm: ArmName; ttftS: number[] }[];
}

function windowed(c: CellOutput): RequestRecord[] {
  return c.records.filter((r) => inMeasureWindow(r, c.windowStartMs, c.windowEndMs));
}

const ttftOf = (r: RequestRecord): number | null => requestMetrics(r)?.ttftMs ?? null;
const itlOf = (r: RequestRecord): number | null => requestMetrics(r)?.itlMs ?? null;
const e2eOf = (r: RequestRecord): number | null => requestMetrics(r)?.e2eMs ?? null;

export function analyze(
  s: BenchSchedule,
  cells: readonly CellOutput[],
  slo: Record<WorkloadName, Slo>,
): BenchResults {
  const key = (w: string, p: string, a: string): string => `${w}|${p}|${a}`;
  const byGroup = new Map<string, CellOutput[]>();
  for (const c of cells) {
    const k = key(c.spec.workload, profileLabel(c.spec.profile), c.spec.arm);
    let l = byGroup.get(k);
    if (!l) byGroup.set(k, (l = []));
    l.push(c);
  }
  const trialsOf = (k: string): CellOutput[] =>
    [...(byGroup.get(k) ?? [])].sort((a, b) => a.spec.trial - b.spec.trial);

  const groups: CellGroup[] = [];
  for (const [k, list] of byGroup) {
    const [workload, profile, arm] = k.split('|') as [WorkloadName, string, ArmName];
    const recs = list.flatMap(windowed);
    const fallbacks: Record<string, number> = {};
    for (const c of list)
      for (const [r, n] of Object.entries(c.fallbacks)) fallbacks[r] = (fallbacks[r] ?? 0) + n;
    const indexStats: Record<string, number> = {};
    for (const c of list)
      for (const [r, n] of Object.entries(c.indexStats)) indexStats[r] = (indexStats[r] ?? 0) + n;
    groups.push({
      workload,
      profile,
      arm,
      trials: list.length,
      requests: recs.length,
      incomplete: list.reduce((n, c) => n + c.records.filter((r) => r.status === 'incomplete').length, 0),
      errored: list.reduce(
        (n, c) => n + erroredInWindow(c.records, c.windowStartMs, c.windowEndMs).length,
        0,
      ),
      summary: summarizeRequests(recs),
      goodputPerMin: mean(
        list.map((c) => goodputPerMin(c.records, slo[workload], c.windowStartMs, c.windowEndMs)),
      ),
      throughputPerMin: mean(list.map((c) => throughputPerMin(c.records, c.windowStartMs, c.windowEndMs))),
      hitRate: recs.length
        ? recs.filter((r) => r.cachedTokens >= r.promptTokens / 2).length / recs.length
        : Number.NaN,
      wallMs: list.reduce((n, c) => n + c.wallMs, 0),
      fallbacks,
      indexStats,
    });
  }

  const comparisons: Comparison[] = [];
  const profilesByWorkload = new Map<WorkloadName, Profile[]>();
  for (const c of cells) {
    const l = profilesByWorkload.get(c.spec.workload) ?? [];
    if (!l.some((p) => profileLabel(p) === profileLabel(c.spec.profile))) l.push(c.spec.profile);
    profilesByWorkload.set(c.spec.workload, l);
  }
  for (const w of s.workloads)
    for (const p of profilesByWorkload.get(w) ?? []) {
      const pl = profileLabel(p);
      const base = trialsOf(key(w, pl, 'random'));
      if (!base.length) continue;
      for (const arm of s.arms) {
        if (arm === 'random') continue;
        const treat = trialsOf(key(w, pl, arm));
        if (treat.length !== base.length) continue;
        // Open loop: identical prompts and arrival times in both arms, so clusters pair (bench.md §5).
        const paired = p.kind === 'poisson';
        const opts = { resamples: s.bootstrapResamples, seed: s.seed, paired };
        const A = base.map(windowed);
        const B = treat.map(windowed);
        const [m, p95] = bootstrapQuantileChange(A, B, ttftOf, [0.5, 0.95], opts);
        const [itl] = bootstrapQuantileChange(A, B, itlOf, [0.5], opts);
        const [e2e] = bootstrapQuantileChange(A, B, e2eOf, [0.5], opts);
        comparisons.push({
          workload: w,
          profile: pl,
          arm,
          paired,
          ttft: { median: m!, p95: p95! },
          itl: { median: itl! },
          e2e: { median: e2e! },
        });
      }
    }

  const goodput: GoodputRow[] = [];
  for (const w of s.workloads) {
    type Point = { n: number; v: number; runs: boolean[][] };
    const at = (arm: ArmName, n: number): Point | null => {
      const list = trialsOf(key(w, `concurrent@${n}`, arm));
      if (!list.length) return null;
      const runs = list.map((c) => goodputIndicators(c.records, slo[w], c.windowStartMs, c.windowEndMs));
      const v = mean(list.map((c) => goodputPerMin(c.records, slo[w], c.windowStartMs, c.windowEndMs)));
      return { n, v, runs };
    };
    const peakOf = (arm: ArmName): Point | null => {
      let best: Point | null = null;
      for (const n of s.concurrency) {
        const p = at(arm, n);
        if (p && (!best || p.v > best.v)) best = p;
      }
      return best;
    };
    const peakLoad = Math.max(...s.concurrency);
    const randomPeak = peakOf('random');
    const randomAtPeakLoad = at('random', peakLoad);
    const minutes = s.capacityWindows.measureS / 60;
    const ratio = (base: Point | null, arm: ArmName, p: Point | null): RatioEstimate | null =>
      base && p && arm !== 'random'
        ? bootstrapRateRatio(base.runs, p.runs, 1 / minutes, {
            resamples: s.bootstrapResamples,
            seed: s.seed,
          })
        : null;
    for (const arm of s.arms) {
      const byConcurrency: Record<string, number> = {};
      for (const n of s.concurrency) {
        const list = trialsOf(key(w, `concurrent@${n}`, arm));
        if (list.length)
          byConcurrency[String(n)] = mean(
            list.map((c) => goodputPerMin(c.records, slo[w], c.windowStartMs, c.windowEndMs)),
          );
      }
      const pk = peakOf(arm);
      if (!pk) continue;
      goodput.push({
        workload: w,
        arm,
        byConcurrency,
        peakConcurrency: pk.n,
        peak: pk.v,
        vsRandom: ratio(randomPeak, arm, pk),
        peakLoad,
        vsRandomAtPeakLoad: ratio(randomAtPeakLoad, arm, at(arm, peakLoad)),
      });
    }
  }

  const latencyLabel = (w: WorkloadName): string => profileLabel(latencyProfile(s, w));
  const cdf: BenchResults['cdf'] = [];
  for (const w of s.workloads)
    for (const arm of s.arms) {
      const recs = trialsOf(key(w, latencyLabel(w), arm)).flatMap(windowed);
      const ttft = recs
        .map(ttftOf)
        .filter((x): x is number => x !== null)
        .sort((a, b) => a - b);
      if (ttft.length) cdf.push({ workload: w, arm, ttftS: ttft.map((x) => Math.round(x) / 1000) });
    }

  const calibration: BenchResults['calibration'] = [];
  for (const w of s.workloads) {
    const g = groups.find((x) => x.workload === w && x.profile === latencyLabel(w) && x.arm === 'random');
    if (!g) continue;
    for (const metric of ['median', 'p95'] as const) {
      const published = PUBLISHED[w].random[metric];
      const measured =
        (metric === 'median' ? g.summary.ttft_ms.median : g.summary.ttft_ms.percentiles.p95) / 1000;
      calibration.push({
        workload: w,
        metric: `TTFT ${metric}`,
        published,
        measured,
        withinTolerance: Math.abs(measured / published - 1) <= 0.2,
      });
    }
  }

  return {
    schedule: s,
    slo,
    groups,
    comparisons,
    goodput,
    targets: checkTargets(s, groups, comparisons, goodput, latencyLabel),
    calibration,
    cdf,
  };
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN;
}

/**
 * An arm's goodput against random's: `2.72×`; `∞` when random has none and the arm some; `–` when both have
 * none (0/0 says nothing).
 */
export function ratioText(est: { ratio: number | null; treatment: number }): string {
  return est.ratio !== null ? `${est.ratio.toFixed(2)}×` : est.treatment > 0 ? '∞' : '–';
}

const pct = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)}%`;

function checkTargets(
  s: BenchSchedule,
  groups: CellGroup[],
  comparisons: Comparison[],
  goodput: GoodputRow[],
  latencyProfile: (w: WorkloadName) => string,
): TargetCheck[] {
  const out: TargetCheck[] = [];
  const cmp = (w: WorkloadName): Comparison | undefined =>
    comparisons.find((c) => c.workload === w && c.arm === 'kinference' && c.profile === latencyProfile(w));
  const change = (
    name: string,
    w: WorkloadName,
    q: 'median' | 'p95',
    test: (x: number) => boolean,
    target: string,
  ): void => {
    const c = cmp(w);
    if (!c) return;
    const x = c.ttft[q].change;
    out.push({
      name,
      target,
      measured: `${pct(x)} (${(c.ttft[q].baseline / 1000).toFixed(2)} s → ${(c.ttft[q].treatment / 1000).toFixed(2)} s)`,
      met: test(x),
    });
  };
  change('shared-prefix median TTFT', 'shared-prefix', 'median', (x) => x <= -0.95, '−95% or better');
  change('shared-prefix p95 TTFT', 'shared-prefix', 'p95', (x) => x <= -0.7, '−70% or better');
  change('multiturn median TTFT', 'multiturn', 'median', (x) => x <= -0.75, '−75% or better');
  change('multiturn p95 TTFT', 'multiturn', 'p95', (x) => x <= -0.6, '−60% or better');
  change('control median TTFT', 'control', 'median', (x) => Math.abs(x) <= 0.05, 'within ±5%');
  change('control p95 TTFT', 'control', 'p95', (x) => x <= -0.4, '−40% or better');
  // "Goodput at peak" read both ways: at the peak load (same concurrency for both arms), and each arm's
  // best concurrency against random's best. Both kinference configurations are checked.
  for (const [w, min] of [
    ['shared-prefix', 8],
    ['multiturn', 4],
  ] as const)
    for (const arm of ['kinference', 'kinference-slo'] as const) {
      const g = goodput.find((x) => x.workload === w && x.arm === arm);
      if (!g) continue;
      const row = (name: string, est: RatioEstimate | null, where: string): void => {
        if (!est) return;
        const r = est.ratio;
        out.push({
          name,
          target: `≥ ${min}×`,
          measured: `${ratioText(est)} (random ${est.baseline.toFixed(1)} → ${est.treatment.toFixed(1)} req/min${where})`,
          met: r === null ? est.treatment > 0 : r >= min,
        });
      };
      row(`${w} goodput at peak load vs random, ${arm}`, g.vsRandomAtPeakLoad, `, both at c=${g.peakLoad}`);
      const rp = goodput.find((x) => x.workload === w && x.arm === 'random');
      row(
        `${w} best goodput vs random's best, ${arm}`,
        g.vsRandom,
        rp ? `, c=${rp.peakConcurrency} vs c=${g.peakConcurrency}` : '',
      );
    }
  for (const w of s.workloads) {
    const k = groups.find(
      (g) => g.workload === w && g.arm === 'kinference' && g.profile === latencyProfile(w),
    );
    const o = groups.find((g) => g.workload === w && g.arm === 'oracle' && g.profile === latencyProfile(w));
    if (!k || !o) continue;
    const r = k.summary.ttft_ms.median / o.summary.ttft_ms.median - 1;
    out.push({
      name: `${w} median TTFT vs oracle`,
      target: 'within 10%',
      measured: `${pct(r)} (${(k.summary.ttft_ms.median / 1000).toFixed(2)} s vs ${(o.summary.ttft_ms.median / 1000).toFixed(2)} s)`,
      met: r <= 0.1,
    });
  }
  return out;
}
