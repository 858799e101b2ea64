// The benchmark's markdown report, laid out as the published table.
import { profileLabel, type ArmName, type WorkloadName } from '../types.js';
import { latencyProfile } from '../schedule.js';
import { ratioText, type BenchResults } from './analyze.js';

const s2 = (ms: number): string => (Number.isFinite(ms) ? (ms / 1000).toFixed(2) : '–');
const pct = (x: number): string =>
  Number.isFinite(x) ? `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)}%` : '–';
const ci = (c: [number, number]): string => `[${pct(c[0])}, ${pct(c[1])}]`;

/** The alt text of a chart written by writeCharts, from its file name (`charts/seed-ttft-cdf-multiturn.svg`). */
function chartAlt(path: string, prefix: string): string {
  const base = path.replace(/^.*\//, '').replace(/\.svg$/, '');
  const kind = base.startsWith(`${prefix}-`) ? base.slice(prefix.length + 1) : base;
  if (kind === 'headline') return 'kinference vs random: TTFT CDF and goodput vs concurrency';
  if (kind === 'goodput-vs-concurrency') return 'goodput vs concurrency, every arm';
  if (kind.startsWith('ttft-cdf-')) return `TTFT CDF, every arm: ${kind.slice('ttft-cdf-'.length)}`;
  return kind;
}

/** The published table's layout (metric, random, arm, improvement, CI), per workload and arm, plus the rest. */
export function toMarkdown(
  r: BenchResults,
  command: string,
  meta: { commit: string; date: string; wallS: number },
  charts: readonly string[] = [],
): string {
  const s = r.schedule;
  const L: string[] = [];
  L.push(`# Kinference benchmark: ${s.name}`, '');
  L.push(`Command: \`${command}\`  `);
  L.push(
    `Commit: ${meta.commit} · ${meta.date} · wall ${(meta.wallS / 60).toFixed(1)} min · mode: discrete-event (virtual time)`,
    '',
  );
  L.push(
    `Fleet: ${s.pods} emulated vLLM pods, profile \`${s.emulatorProfile}\`, KV ${s.kvCapacityTokens.toLocaleString('en')} tokens/pod, block 16. ` +
      `Seed ${s.seed}, ${s.trials} trial(s), fresh prompts per trial. Random arm: a random pod ${s.randomRouting === 'per-connection' ? "per keep-alive connection (kube-proxy behind GuideLLM's httpx pools, 5 s keep-alive)" : 'per request'}. Client: ${s.clientWorkers ?? 10} worker processes (conversations and connections per worker). Latency profile: ${s.arrivals === 'guidellm' ? "GuideLLM's poisson strategy as it runs (every worker draws the same gaps, random_seed = seed + trial)" : 'Poisson, slots dealt to the workers in turn'}, windows ${s.latencyWindows.warmupS}/${s.latencyWindows.measureS}/${s.latencyWindows.cooldownS} s; ` +
      (s.concurrency.length > 0
        ? `capacity: concurrency ${s.concurrency.join('/')}, windows ${s.capacityWindows.warmupS}/${s.capacityWindows.measureS}/${s.capacityWindows.cooldownS} s. `
        : 'no capacity profile. ') +
      `Percentiles as GuideLLM computes them (nearest rank on the running sum of the weights, float for float). CIs: paired hierarchical bootstrap (trials → clusters), ${s.bootstrapResamples} resamples, 95% percentile intervals.`,
    '',
  );
  L.push(
    '## Targets (kinference vs random, same run)',
    '',
    '| target | wanted | measured | met |',
    '|---|---|---|---|',
  );
  for (const t of r.targets)
    L.push(`| ${t.name} | ${t.target} | ${t.measured} | ${t.met ? 'yes' : '**no**'} |`);
  L.push('');

  // The charts as images, so the report shows them where it is read (GitHub renders SVG images).
  if (charts.length > 0) {
    L.push('## Charts', '');
    for (const c of charts) L.push(`![${chartAlt(c, s.name)}](${c})`, '');
  }

  L.push('## SLO used for goodput', '', '| workload | TTFT ≤ | ITL ≤ | basis |', '|---|---|---|---|');
  for (const w of s.workloads)
    L.push(`| ${w} | ${s2(r.slo[w].ttftMs)} s | ${r.slo[w].itlMs} ms | ${r.slo[w].basis} |`);
  L.push('');

  for (const w of s.workloads) {
    const lp = profileLabel(latencyProfile(s, w));
    L.push(`## ${w} — ${lp} (TTFT, s)`, '');
    L.push(
      '| arm | metric | random | arm | improvement | 95% CI | n (random / arm) |',
      '|---|---|---|---|---|---|---|',
    );
    const base = r.groups.find((g) => g.workload === w && g.profile === lp && g.arm === 'random');
    for (const c of r.comparisons.filter((c) => c.workload === w && c.profile === lp)) {
      const g = r.groups.find((x) => x.workload === w && x.profile === lp && x.arm === c.arm);
      const n = `${base?.requests ?? 0} / ${g?.requests ?? 0}`;
      L.push(
        `| ${c.arm} | median TTFT | ${s2(c.ttft.median.baseline)} | ${s2(c.ttft.median.treatment)} | ${pct(c.ttft.median.change)} | ${ci(c.ttft.median.ci95)} | ${n} |`,
      );
      L.push(
        `| ${c.arm} | p95 TTFT | ${s2(c.ttft.p95.baseline)} | ${s2(c.ttft.p95.treatment)} | ${pct(c.ttft.p95.change)} | ${ci(c.ttft.p95.ci95)} | |`,
      );
      L.push(
        `| ${c.arm} | median ITL (ms) | ${c.itl.median.baseline.toFixed(1)} | ${c.itl.median.treatment.toFixed(1)} | ${pct(c.itl.median.change)} | ${ci(c.itl.median.ci95)} | |`,
      );
      L.push(
        `| ${c.arm} | median E2E | ${s2(c.e2e.median.baseline)} | ${s2(c.e2e.median.treatment)} | ${pct(c.e2e.median.change)} | ${ci(c.e2e.median.ci95)} | |`,
      );
    }
    L.push('');
  }

  if (s.concurrency.length > 0) L.push('## Goodput (requests/min meeting the SLO) vs concurrency', '');
  for (const w of s.concurrency.length > 0 ? s.workloads : []) {
    L.push(
      `### ${w}`,
      '',
      `| arm | ${s.concurrency.map((n) => `c=${n}`).join(' | ')} | at c=${Math.max(...s.concurrency)} vs random | 95% CI | best | best vs random's best | 95% CI |`,
      `|---|${s.concurrency.map(() => '---|').join('')}---|---|---|---|---|`,
    );
    const ratioOf = (vr: (typeof r.goodput)[number]['vsRandom']): [string, string] =>
      vr
        ? [
            ratioText(vr),
            // 0 against 0 has no interval either.
            vr.ratio === null && vr.treatment <= 0
              ? '–'
              : `[${vr.ci95[0]?.toFixed(2) ?? '–'}, ${vr.ci95[1]?.toFixed(2) ?? '∞'}]`,
          ]
        : ['1×', ''];
    for (const g of r.goodput.filter((g) => g.workload === w)) {
      const [load, loadCi] = ratioOf(g.vsRandomAtPeakLoad);
      const [best, bestCi] = ratioOf(g.vsRandom);
      L.push(
        `| ${g.arm} | ${s.concurrency.map((n) => (g.byConcurrency[String(n)] ?? Number.NaN).toFixed(1)).join(' | ')} | ${load} | ${loadCi} | ${g.peak.toFixed(1)} @${g.peakConcurrency} | ${best} | ${bestCi} |`,
      );
    }
    L.push('');
  }

  L.push('## Every cell (pooled over trials, measure window)', '');
  L.push(
    '| workload | profile | arm | n | TTFT p50 | TTFT p95 | ITL p50 ms | TPOT p50 ms | E2E p50 | hit ≥½ | goodput/min | thru/min | incomplete | 429s | wall s |',
  );
  L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const g of r.groups) {
    const m = g.summary;
    L.push(
      `| ${g.workload} | ${g.profile} | ${g.arm} | ${g.requests} | ${s2(m.ttft_ms.median)} | ${s2(m.ttft_ms.percentiles.p95)} | ${m.itl_ms.median.toFixed(1)} | ${m.tpot_ms.median.toFixed(1)} | ${s2(m.e2e_ms.median)} | ${(g.hitRate * 100).toFixed(0)}% | ${g.goodputPerMin.toFixed(1)} | ${g.throughputPerMin.toFixed(1)} | ${g.incomplete} | ${g.errored} | ${(g.wallMs / 1000).toFixed(1)} |`,
    );
  }
  L.push('');
  L.push(
    '## Calibration: random arm vs the published random figures (±20%)',
    '',
    '| workload | metric | published s | measured s | within ±20% |',
    '|---|---|---|---|---|',
  );
  for (const c of r.calibration)
    L.push(
      `| ${c.workload} | ${c.metric} | ${c.published.toFixed(2)} | ${c.measured.toFixed(2)} | ${c.withinTolerance ? 'yes' : '**no**'} |`,
    );
  L.push('');
  return L.join('\n');
}

export type { ArmName, WorkloadName };
