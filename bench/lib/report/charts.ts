// The benchmark's SVG charts: TTFT CDF per arm and goodput against concurrency (vega-lite).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TopLevelSpec } from 'vega-lite';
import type { BenchResults } from './analyze.js';

async function render(spec: TopLevelSpec): Promise<string> {
  // Loaded when a chart is drawn: vega and vega-lite take ~0.8 s to import, which every `--help` paid.
  const [vega, { compile }] = await Promise.all([import('vega'), import('vega-lite')]);
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

/**
 * The headline chart (kinference vs random), then TTFT CDF per arm (one chart per workload) and goodput vs
 * concurrency, as SVG files (vega-lite, headless).
 */
export async function writeCharts(r: BenchResults, dir: string, prefix: string): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  // First: the report shows the charts in this order.
  const headline = await headlineChart(r);
  if (headline !== null) {
    const f = join(dir, `${prefix}-headline.svg`);
    writeFileSync(f, headline);
    written.push(f);
  }
  for (const w of r.schedule.workloads) {
    const values = r.cdf
      .filter((c) => c.workload === w)
      .flatMap((c) => {
        const n = c.ttftS.length;
        const step = Math.max(1, Math.floor(n / 400));
        const pts: { arm: string; ttft: number; p: number }[] = [];
        for (let i = 0; i < n; i += step) pts.push({ arm: c.arm, ttft: c.ttftS[i]!, p: (i + 1) / n });
        pts.push({ arm: c.arm, ttft: c.ttftS[n - 1]!, p: 1 });
        return pts;
      });
    if (!values.length) continue;
    const svg = await render({
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: `${w}: TTFT CDF per arm (Poisson, measure window)`,
      width: 560,
      height: 320,
      data: { values },
      mark: { type: 'line', interpolate: 'step-after' },
      encoding: {
        x: { field: 'ttft', type: 'quantitative', title: 'TTFT (s, log)', scale: { type: 'log' } },
        y: { field: 'p', type: 'quantitative', title: 'fraction of requests' },
        color: { field: 'arm', type: 'nominal' },
      },
    });
    const f = join(dir, `${prefix}-ttft-cdf-${w}.svg`);
    writeFileSync(f, svg);
    written.push(f);
  }
  const gp = r.goodput.flatMap((g) =>
    Object.entries(g.byConcurrency).map(([c, v]) => ({
      workload: g.workload,
      arm: g.arm,
      concurrency: Number(c),
      goodput: v,
    })),
  );
  if (gp.length) {
    const svg = await render({
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: 'Goodput (requests/min meeting the SLO) vs concurrency',
      data: { values: gp },
      facet: { column: { field: 'workload', type: 'nominal' } },
      spec: {
        width: 260,
        height: 260,
        mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'concurrency', type: 'quantitative' },
          y: { field: 'goodput', type: 'quantitative', title: 'goodput (req/min)' },
          color: { field: 'arm', type: 'nominal' },
        },
      },
      resolve: { scale: { y: 'independent' } },
    });
    const f = join(dir, `${prefix}-goodput-vs-concurrency.svg`);
    writeFileSync(f, svg);
    written.push(f);
  }
  return written;
}

// The README's picture: the nine arms of the full charts are too many to read at a glance.
const HEADLINE_ARMS: readonly string[] = ['random', 'kinference', 'kinference-slo'];

/**
 * kinference against random (and kinference with admission control) on the workloads with shared prefixes:
 * the TTFT CDF above, goodput against concurrency below. Null when the run has neither.
 */
async function headlineChart(r: BenchResults): Promise<string | null> {
  const workloads: readonly string[] = r.schedule.workloads.filter((w) => w !== 'control');
  const ttft = r.cdf
    .filter((c) => workloads.includes(c.workload) && HEADLINE_ARMS.includes(c.arm))
    .flatMap((c) => {
      const n = c.ttftS.length;
      const step = Math.max(1, Math.floor(n / 400));
      const pts: { workload: string; arm: string; ttft: number; p: number }[] = [];
      for (let i = 0; i < n; i += step)
        pts.push({ workload: c.workload, arm: c.arm, ttft: c.ttftS[i]!, p: (i + 1) / n });
      pts.push({ workload: c.workload, arm: c.arm, ttft: c.ttftS[n - 1]!, p: 1 });
      return pts;
    });
  const gp = r.goodput
    .filter((g) => workloads.includes(g.workload) && HEADLINE_ARMS.includes(g.arm))
    .flatMap((g) =>
      Object.entries(g.byConcurrency).map(([c, v]) => ({
        workload: g.workload,
        arm: g.arm,
        concurrency: Number(c),
        goodput: v,
      })),
    );
  if (!ttft.length || !gp.length) return null;
  const color = {
    field: 'arm',
    type: 'nominal',
    title: 'router',
    scale: { domain: [...HEADLINE_ARMS], range: ['#e45756', '#4c78a8', '#54a24b'] },
  } as const;
  const column = { field: 'workload', type: 'nominal' as const, title: null, sort: [...workloads] };
  return render({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'kinference vs random routing: 3 emulated vLLM pods (L40S, 27B FP8), GuideLLM workloads',
      subtitle: `bench:${r.schedule.name}, discrete-event, ${r.schedule.trials} trial(s); kinference-slo = with admission control`,
    },
    vconcat: [
      {
        data: { values: ttft },
        facet: { column },
        spec: {
          width: 340,
          height: 200,
          mark: { type: 'line', interpolate: 'step-after' },
          encoding: {
            x: {
              field: 'ttft',
              type: 'quantitative',
              title: 'time to first token (s, log)',
              scale: { type: 'log' },
            },
            y: { field: 'p', type: 'quantitative', title: 'fraction of requests (Poisson load)' },
            color,
          },
        },
      },
      {
        data: { values: gp },
        facet: { column },
        spec: {
          width: 340,
          height: 200,
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'concurrency', type: 'quantitative', title: 'concurrent streams' },
            y: { field: 'goodput', type: 'quantitative', title: 'goodput (req/min within SLO)' },
            color,
          },
        },
        resolve: { scale: { y: 'independent' } },
      },
    ],
  });
}
