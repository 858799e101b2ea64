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

/** TTFT CDF per arm (one chart per workload) and goodput vs concurrency, as SVG files (vega-lite, headless). */
export async function writeCharts(r: BenchResults, dir: string, prefix: string): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
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
