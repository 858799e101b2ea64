// bench:load's results: per-profile summaries, the JSON file and the markdown table, comparisons.
import {
  bootstrapChange,
  bootstrapRateRatio,
  meanOf,
  percentileOf,
  type RatioEstimate,
  type StatChange,
} from '../stats/bootstrap.js';
import { goodputIndicators, goodputPerMin, throughputPerMin, type Slo } from '../stats/goodput.js';
import {
  erroredInWindow,
  inMeasureWindow,
  requestMetrics,
  summarizeRequests,
  type MetricSummaries,
} from '../stats/metrics.js';
import { promptTokensOfTurn } from '../slo.js';
import { profileLabel, type Profile, type RequestRecord, type WorkloadName } from '../types.js';
import type { WorkloadShapes } from '../workload/workloads.js';
import type { LoadRun } from './run-load.js';

export interface LoadSummary {
  /** Requests sent, over all runs. */
  sent: number;
  /** Successful requests overlapping the measure window (GuideLLM's rule): what the metrics describe. */
  measured: number;
  /** Still running when a run ended. */
  incomplete: number;
  /** Failed (not 429), started in the measure window. */
  errored: number;
  /** Answered 429 (load shedding), started in the measure window. */
  rejected429: number;
  metrics: MetricSummaries;
  /** Requests/min completing in the window within the SLO, mean over runs. */
  goodputPerMin: number;
  throughputPerMin: number;
  /** Prompt tokens the server reported (mean) against the content tokens the same requests carried. */
  promptTokensMean: number;
  expectedPromptTokensMean: number;
  /** Cached prompt tokens the server reported, share of all prompt tokens (null: it reports none). */
  cachedShare: number | null;
  errors: Record<string, number>;
}

/** One profile of a run (a sweep has several): its runs and their summary. */
export interface LoadCell {
  profile: Profile;
  /** Lead the prompts of each run (trial) of this profile. */
  salts: string[];
  summary: LoadSummary;
  runs: LoadRun[];
}

export interface LoadResultsFile {
  meta: {
    tool: 'bench:load';
    command: string;
    date: string;
    commit: string;
    /** Without credentials. */
    url: string;
    model: string;
    workload: WorkloadName;
    shapes: WorkloadShapes;
    trials: number;
    seed: number;
    salt: string;
    /** Names of the extra headers sent (values are not kept). */
    headers: string[];
    wallS: number;
    /** Why the run stopped early, if it did. */
    aborted: string | null;
  };
  slo: Slo;
  /** In the order run (a sweep: every rate or concurrency given). */
  cells: LoadCell[];
}

/** A run stopped (Ctrl-C) before its measure window opened has an empty one: it measured nothing. */
const hasWindow = (run: LoadRun): boolean => run.windowEndMs > run.windowStartMs;

function windowed(run: LoadRun): RequestRecord[] {
  if (!hasWindow(run)) return [];
  return run.records.filter((r) => inMeasureWindow(r, run.windowStartMs, run.windowEndMs));
}

export function summarizeLoad(
  runs: readonly LoadRun[],
  slo: Slo,
  workload: WorkloadName,
  shapes: WorkloadShapes,
): LoadSummary {
  const measured = runs.flatMap(windowed);
  const errors: Record<string, number> = {};
  for (const run of runs) for (const [k, n] of Object.entries(run.errors)) errors[k] = (errors[k] ?? 0) + n;
  let errored = 0;
  let rejected429 = 0;
  for (const run of runs.filter(hasWindow)) {
    const shed = new Set(run.rejected);
    for (const r of erroredInWindow(run.records, run.windowStartMs, run.windowEndMs)) {
      if (shed.has(r.key)) rejected429++;
      else errored++;
    }
  }
  // Rates over the runs that had a window (each its own length: a stopped run's ends where it stopped).
  const timed = runs.filter(hasWindow);
  const mean = (f: (run: LoadRun) => number): number =>
    timed.length ? timed.reduce((s, run) => s + f(run), 0) / timed.length : Number.NaN;
  const promptSum = measured.reduce((s, r) => s + r.promptTokens, 0);
  const cachedSum = measured.reduce((s, r) => s + r.cachedTokens, 0);
  return {
    sent: runs.reduce((s, run) => s + run.records.length, 0),
    measured: measured.length,
    incomplete: runs.reduce((s, run) => s + run.records.filter((r) => r.status === 'incomplete').length, 0),
    errored,
    rejected429,
    metrics: summarizeRequests(measured),
    goodputPerMin: mean((run) => goodputPerMin(run.records, slo, run.windowStartMs, run.windowEndMs)),
    throughputPerMin: mean((run) => throughputPerMin(run.records, run.windowStartMs, run.windowEndMs)),
    promptTokensMean: measured.length ? promptSum / measured.length : Number.NaN,
    expectedPromptTokensMean: measured.length
      ? measured.reduce((a, r) => a + promptTokensOfTurn(shapes, workload, r.turnIndex), 0) / measured.length
      : Number.NaN,
    cachedShare: cachedSum > 0 ? cachedSum / promptSum : null,
    errors,
  };
}

const s2 = (ms: number): string => (Number.isFinite(ms) ? (ms / 1000).toFixed(2) : '–');
const ms0 = (ms: number): string => (Number.isFinite(ms) ? ms.toFixed(0) : '–');
// JSON keeps NaN as null.
const f1 = (x: number | null): string => (x !== null && Number.isFinite(x) ? x.toFixed(1) : '–');

export function loadMarkdown(f: LoadResultsFile): string {
  const m = f.meta;
  const lines = [
    `## bench:load — ${m.workload}, ${f.cells.map((c) => profileLabel(c.profile)).join(', ')}, ${m.trials} run(s) each`,
    '',
    `\`${m.command}\` (${m.date}, commit ${m.commit}, ${Math.round(m.wallS)} s)`,
    '',
    `Endpoint ${m.url}, model \`${m.model}\`, seed ${m.seed}, salt \`${m.salt}\`.`,
    `SLO: TTFT ≤ ${s2(f.slo.ttftMs)} s (${f.slo.basis}), ITL ≤ ${f.slo.itlMs} ms.`,
  ];
  if (m.aborted) lines.push('', `**Warning:** the run stopped early: ${m.aborted}.`);
  for (const c of f.cells) {
    const s = c.summary;
    const x = s.metrics;
    const p = c.profile;
    lines.push(
      '',
      `### ${profileLabel(p)} (windows ${p.warmupS}/${p.measureS}/${p.cooldownS} s)`,
      '',
      '| metric | p50 | p95 | p99 | mean |',
      '|---|---|---|---|---|',
      `| TTFT (s) | ${s2(x.ttft_ms.percentiles.p50)} | ${s2(x.ttft_ms.percentiles.p95)} | ${s2(x.ttft_ms.percentiles.p99)} | ${s2(x.ttft_ms.mean)} |`,
      `| ITL (ms) | ${ms0(x.itl_ms.percentiles.p50)} | ${ms0(x.itl_ms.percentiles.p95)} | ${ms0(x.itl_ms.percentiles.p99)} | ${ms0(x.itl_ms.mean)} |`,
      `| TPOT (ms) | ${ms0(x.tpot_ms.percentiles.p50)} | ${ms0(x.tpot_ms.percentiles.p95)} | ${ms0(x.tpot_ms.percentiles.p99)} | ${ms0(x.tpot_ms.mean)} |`,
      `| E2E (s) | ${s2(x.e2e_ms.percentiles.p50)} | ${s2(x.e2e_ms.percentiles.p95)} | ${s2(x.e2e_ms.percentiles.p99)} | ${s2(x.e2e_ms.mean)} |`,
      '',
      `Requests: ${s.sent} sent, ${s.measured} measured, ${s.incomplete} incomplete, ${s.errored} failed, ` +
        `${s.rejected429} answered 429. Goodput ${f1(s.goodputPerMin)}/min within the SLO, throughput ` +
        `${f1(s.throughputPerMin)}/min.`,
      s.measured === 0
        ? 'Prompt tokens as the server counted them: none measured.'
        : `Prompt tokens as the server counted them: mean ${Math.round(s.promptTokensMean).toLocaleString('en')} ` +
            `(the content sent: ${Math.round(s.expectedPromptTokensMean).toLocaleString('en')}); cached: ` +
            (s.cachedShare === null
              ? 'not reported.'
              : `${(s.cachedShare * 100).toFixed(1)}% of prompt tokens.`),
    );
    for (const w of cellWarnings(c)) lines.push('', `**Warning:** ${w}`);
    const errs = Object.entries(s.errors).sort((a, b) => b[1] - a[1]);
    if (errs.length > 0) {
      lines.push('', '| failures (the whole run) | count |', '|---|---|');
      for (const [k, n] of errs) lines.push(`| ${k.replace(/\|/g, '\\|').replace(/\s+/g, ' ')} | ${n} |`);
    }
  }
  if (f.cells.length > 1) {
    lines.push(
      '',
      '### Goodput by profile',
      '',
      '| profile | goodput/min | throughput/min | TTFT p50 (s) | TTFT p95 (s) | 429s |',
      '|---|---|---|---|---|---|',
    );
    for (const c of f.cells) {
      const s = c.summary;
      lines.push(
        `| ${profileLabel(c.profile)} | ${f1(s.goodputPerMin)} | ${f1(s.throughputPerMin)} | ${s2(s.metrics.ttft_ms.percentiles.p50)} | ${s2(s.metrics.ttft_ms.percentiles.p95)} | ${s.rejected429} |`,
      );
    }
  }
  return lines.join('\n');
}

/** What makes a whole file's figures suspect: said, not hidden. */
export function loadWarnings(f: LoadResultsFile): string[] {
  const out = f.meta.aborted ? [`the run stopped early: ${f.meta.aborted}.`] : [];
  for (const c of f.cells) {
    const label = f.cells.length > 1 ? `${profileLabel(c.profile)}: ` : '';
    out.push(...cellWarnings(c).map((w) => label + w));
  }
  return out;
}

/** What makes one profile's figures suspect. */
export function cellWarnings(c: LoadCell): string[] {
  const s = c.summary;
  const out: string[] = [];
  if (s.measured === 0) out.push('no request completed inside the measure window: there are no figures.');
  const failed = s.errored / Math.max(1, s.errored + s.measured);
  if (s.errored > 0)
    out.push(
      `${s.errored} ${s.errored === 1 ? 'request' : 'requests'} failed (${(failed * 100).toFixed(1)}%): see failures.`,
    );
  const dev = s.promptTokensMean / s.expectedPromptTokensMean - 1;
  // The chat template adds a few tokens per message; more than 10% off means another tokenizer.
  if (Number.isFinite(dev) && Math.abs(dev) > 0.1)
    out.push(
      `the server counted ${Math.round(s.promptTokensMean)} prompt tokens per request against the ` +
        `${Math.round(s.expectedPromptTokensMean)} sent: pass the served model's tokenizer.json with --tokenizer for token-exact prompts.`,
    );
  return out;
}

export interface CompareRow {
  /** The profile the row is about. */
  profile: string;
  metric: string;
  baseline: number;
  candidate: number;
  /** candidate/baseline − 1 (latency) or the ratio (goodput). */
  change: number | null;
  ci95: [number | null, number | null];
  unit: 's' | 'ms' | '/min';
}

export interface Comparison {
  paired: boolean;
  notes: string[];
  rows: CompareRow[];
}

const sameProfile = (a: Profile, b: Profile): boolean => JSON.stringify(a) === JSON.stringify(b);

const perMin = (run: LoadRun): number => 60_000 / (run.windowEndMs - run.windowStartMs);

function goodputRow(
  profile: string,
  metric: string,
  a: LoadCell,
  b: LoadCell,
  slo: Slo,
  resamples: number,
  seed: number,
): CompareRow {
  const good = (run: LoadRun): boolean[] =>
    goodputIndicators(run.records, slo, run.windowStartMs, run.windowEndMs);
  const g: RatioEstimate = bootstrapRateRatio(a.runs.map(good), b.runs.map(good), perMin(a.runs[0]!), {
    resamples,
    seed,
  });
  return {
    profile,
    metric,
    baseline: g.baseline,
    candidate: g.treatment,
    change: g.ratio,
    ci95: g.ci95,
    unit: '/min',
  };
}

/**
 * Candidate against baseline, profile by profile and run i against run i: the relative change of TTFT
 * p50/p95/mean, ITL p50 and E2E p50 with hierarchical bootstrap CIs (paired by conversation when both are
 * open loop with the same seed: the same prompts at the same times), and the goodput ratio. For a sweep, also
 * the goodput at the highest load and each side's best against the other's best, as the study reads "at peak".
 */
export function compareLoads(a: LoadResultsFile, b: LoadResultsFile, resamples: number): Comparison {
  const ma = a.meta;
  const mb = b.meta;
  if (ma.workload !== mb.workload) throw new Error(`different workloads: ${ma.workload} vs ${mb.workload}`);
  if (JSON.stringify(ma.shapes) !== JSON.stringify(mb.shapes)) throw new Error('different workload shapes');
  if (ma.trials !== mb.trials) throw new Error(`different numbers of runs: ${ma.trials} vs ${mb.trials}`);
  const notes: string[] = [];
  const pairs = a.cells.flatMap((ca) => {
    const cb = b.cells.find((x) => sameProfile(x.profile, ca.profile));
    if (!cb) return [];
    if (ca.runs.length === 0 || ca.runs.length !== cb.runs.length) {
      // A run stopped early (Ctrl-C) leaves a profile with fewer runs: its runs no longer pair.
      notes.push(
        `${profileLabel(ca.profile)}: ${ca.runs.length} run(s) against ${cb.runs.length}: not compared`,
      );
      return [];
    }
    // A run cut short measured a shorter window and fewer of the paired requests: no like-for-like figures.
    const cut = [...ca.runs, ...cb.runs].find((r) => r.aborted);
    if (cut) {
      notes.push(`${profileLabel(ca.profile)}: a run stopped early (${cut.aborted}): not compared`);
      return [];
    }
    return [[ca, cb] as const];
  });
  if (pairs.length === 0)
    throw new Error(
      `no profile in common with as many runs: ${a.cells.map((c) => profileLabel(c.profile)).join(', ')} vs ${b.cells
        .map((c) => profileLabel(c.profile))
        .join(', ')} (windows included)${notes.length > 0 ? `; ${notes.join('; ')}` : ''}`,
    );
  for (const [label, f, other] of [
    ['baseline', a, b],
    ['candidate', b, a],
  ] as const) {
    const only = f.cells.filter((c) => !other.cells.some((x) => sameProfile(x.profile, c.profile)));
    if (only.length > 0)
      notes.push(
        `only the ${label} ran ${only.map((c) => profileLabel(c.profile)).join(', ')}: not compared`,
      );
  }
  const poisson = pairs[0]![0].profile.kind === 'poisson';
  const paired = poisson && ma.seed === mb.seed;
  if (!paired)
    notes.push(
      poisson
        ? `different seeds (${ma.seed}, ${mb.seed}): unpaired comparison`
        : 'closed loop: the runs complete different requests, so only runs are paired',
    );
  if (a.slo.ttftMs !== b.slo.ttftMs || a.slo.itlMs !== b.slo.itlMs)
    notes.push(
      `goodput of both counted with the baseline's SLO (TTFT ≤ ${s2(a.slo.ttftMs)} s, ITL ≤ ${a.slo.itlMs} ms)`,
    );
  for (const [label, f] of [
    ['baseline', a],
    ['candidate', b],
  ] as const)
    for (const w of loadWarnings(f)) notes.push(`${label}: ${w}`);

  const opts = { resamples, seed: ma.seed, paired };
  const rows: CompareRow[] = [];
  for (const [ca, cb] of pairs) {
    const profile = profileLabel(ca.profile);
    const A = ca.runs.map(windowed);
    const B = cb.runs.map(windowed);
    const row = (metric: string, unit: 's' | 'ms', c: StatChange): CompareRow => ({
      profile,
      metric,
      baseline: c.baseline,
      candidate: c.treatment,
      change: c.change,
      ci95: c.ci95,
      unit,
    });
    const ttft = bootstrapChange(
      A,
      B,
      (r) => requestMetrics(r)?.ttftMs ?? null,
      [percentileOf(0.5), percentileOf(0.95), meanOf],
      opts,
    );
    const [itl] = bootstrapChange(A, B, (r) => requestMetrics(r)?.itlMs ?? null, [percentileOf(0.5)], opts);
    const [e2e] = bootstrapChange(A, B, (r) => requestMetrics(r)?.e2eMs ?? null, [percentileOf(0.5)], opts);
    rows.push(
      row('TTFT p50', 's', ttft[0]!),
      row('TTFT p95', 's', ttft[1]!),
      row('TTFT mean', 's', ttft[2]!),
      row('ITL p50', 'ms', itl!),
      row('E2E p50', 's', e2e!),
      goodputRow(profile, 'goodput', ca, cb, a.slo, resamples, ma.seed),
    );
  }
  if (pairs.length > 1) {
    const load = (c: LoadCell): number => (c.profile.kind === 'poisson' ? c.profile.rate : c.profile.streams);
    const top = [...pairs].sort((x, y) => load(y[0]) - load(x[0]))[0]!;
    rows.push(
      goodputRow(
        `${profileLabel(top[0].profile)} (highest load)`,
        'goodput at peak load',
        top[0],
        top[1],
        a.slo,
        resamples,
        ma.seed,
      ),
    );
    const best = (i: 0 | 1): LoadCell =>
      pairs.map((p) => p[i]).sort((x, y) => y.summary.goodputPerMin - x.summary.goodputPerMin)[0]!;
    const [ba, bb] = [best(0), best(1)];
    rows.push(
      goodputRow(
        `${profileLabel(ba.profile)} vs ${profileLabel(bb.profile)}`,
        'best goodput vs best',
        ba,
        bb,
        a.slo,
        resamples,
        ma.seed,
      ),
    );
  }
  return { paired, notes, rows };
}

export function comparisonMarkdown(
  c: Comparison,
  a: LoadResultsFile,
  b: LoadResultsFile,
  command: string,
): string {
  const v = (x: number, unit: CompareRow['unit']): string =>
    unit === 's' ? s2(x) : unit === 'ms' ? ms0(x) : x.toFixed(1);
  const pct = (x: number | null): string =>
    x === null || !Number.isFinite(x) ? '–' : `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)}%`;
  const ratio = (x: number | null): string => (x === null || !Number.isFinite(x) ? '–' : `${x.toFixed(2)}×`);
  const lines = [
    `## ${a.meta.workload}: ${a.meta.url} (baseline) vs ${b.meta.url}`,
    '',
    `\`${command}\`: baseline \`${a.meta.command}\` (${a.meta.date}), candidate \`${b.meta.command}\` (${b.meta.date}).`,
    '',
    `${a.meta.trials} run(s) each; 95% CIs from a ${c.paired ? 'paired' : 'run-paired'} hierarchical bootstrap.`,
    '',
    '| profile | metric | baseline | candidate | change | 95% CI |',
    '|---|---|---|---|---|---|',
  ];
  for (const r of c.rows) {
    const unit = r.unit === '/min' ? '/min' : ` ${r.unit}`;
    const fmt = r.unit === '/min' ? ratio : pct;
    // Goodput from nothing: the ratio is infinite, its CI undefined.
    const fromNothing = r.unit === '/min' && r.baseline === 0 && r.candidate > 0;
    const change = fromNothing ? '∞' : fmt(r.change);
    const ci = fromNothing ? '–' : `[${fmt(r.ci95[0])}, ${fmt(r.ci95[1])}]`;
    lines.push(
      `| ${r.profile} | ${r.metric} | ${v(r.baseline, r.unit)}${unit} | ${v(r.candidate, r.unit)}${unit} | ${change} | ${ci} |`,
    );
  }
  for (const n of c.notes) lines.push('', `Note: ${n.endsWith('.') ? n : `${n}.`}`);
  return lines.join('\n');
}
