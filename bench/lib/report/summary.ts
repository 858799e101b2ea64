// The README's results table (between its bench-summary markers), rendered from a benchmark's results.
import { PUBLISHED, type BenchResults, type GoodputRow } from './analyze.js';
import { profileLabel, type WorkloadName } from '../types.js';
import { latencyProfile } from '../schedule.js';

export const SUMMARY_START = '<!-- bench-summary:start -->';
export const SUMMARY_END = '<!-- bench-summary:end -->';

const s2 = (ms: number): string => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '–');
const pct = (x: number, digits: number): string =>
  Number.isFinite(x) ? `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(digits)}%` : '–';
const perMin = (x: number | undefined): string => (x === undefined ? '–' : `${x.toFixed(1)} req/min`);
const times = (ratio: number | null, treatment: number): string =>
  ratio !== null ? `${ratio.toFixed(1)}×` : treatment > 0 ? '∞' : '–';
/** A table row; an empty cell is one space, as in a hand-written table. */
const line = (cells: string[]): string => `|${cells.map((c) => (c === '' ? ' ' : ` ${c} `)).join('|')}|`;
const ORDER: readonly WorkloadName[] = ['shared-prefix', 'multiturn', 'control'];

/**
 * kinference vs random per workload (median and p95 TTFT at the latency profile, the published change, the
 * oracle's median), then goodput at the highest load and at each side's best, with admission control when the
 * run has that arm. The rows of the README's table, markers excluded.
 */
export function renderSummary(r: BenchResults): string {
  const s = r.schedule;
  const L = [
    '| workload | metric | random | kinference | change | published | oracle |',
    '|---|---|---|---|---|---|---|',
  ];
  const workloads = ORDER.filter((w) => s.workloads.includes(w));
  for (const w of workloads) {
    const lp = profileLabel(latencyProfile(s, w));
    const c = r.comparisons.find((x) => x.workload === w && x.profile === lp && x.arm === 'kinference');
    if (c === undefined) continue;
    const oracle = r.comparisons.find((x) => x.workload === w && x.profile === lp && x.arm === 'oracle');
    const pub = PUBLISHED[w];
    for (const q of ['median', 'p95'] as const) {
      const m = c.ttft[q];
      const published = pct(pub.kinference[q] / pub.random[q] - 1, 0);
      const o = q === 'median' && oracle ? s2(oracle.ttft.median.treatment) : '';
      L.push(line([w, `${q} TTFT`, s2(m.baseline), s2(m.treatment), pct(m.change, 1), published, o]));
    }
  }
  const arm = s.arms.includes('kinference-slo') ? 'kinference-slo' : 'kinference';
  const note = arm === 'kinference-slo' ? ', admission control on' : '';
  const row = (w: WorkloadName, a: string): GoodputRow | undefined =>
    r.goodput.find((g) => g.workload === w && g.arm === a);
  const gw = workloads.filter((w) => w !== 'control' && row(w, arm)?.vsRandom);
  for (const w of gw) {
    const g = row(w, arm)!;
    const est = g.vsRandomAtPeakLoad!;
    const o = row(w, 'oracle')?.byConcurrency[String(g.peakLoad)];
    const pr: number | undefined = PUBLISHED.goodputRatio[w as keyof typeof PUBLISHED.goodputRatio];
    const published = pr === undefined ? '' : `${pr}×`;
    L.push(
      line([
        w,
        `goodput at peak load (c=${g.peakLoad})${note}`,
        perMin(est.baseline),
        perMin(est.treatment),
        times(est.ratio, est.treatment),
        published,
        perMin(o),
      ]),
    );
  }
  for (const w of gw) {
    const est = row(w, arm)!.vsRandom!;
    const o = row(w, 'oracle')?.peak;
    L.push(
      line([
        w,
        `best goodput (any concurrency)${note}`,
        perMin(est.baseline),
        perMin(est.treatment),
        times(est.ratio, est.treatment),
        '',
        perMin(o),
      ]),
    );
  }
  return `${L.join('\n')}\n`;
}

/** `readme` with the summary between its markers; unchanged when the markers are absent. */
export function spliceSummary(readme: string, r: BenchResults): string {
  const a = readme.indexOf(SUMMARY_START);
  const b = readme.indexOf(SUMMARY_END);
  if (a < 0 || b < a) return readme;
  return `${readme.slice(0, a + SUMMARY_START.length)}\n${renderSummary(r)}${readme.slice(b)}`;
}
