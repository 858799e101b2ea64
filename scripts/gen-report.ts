// Rewrites a benchmark's report and charts (bench/results/<name>.md, charts/) from its results JSON.
/**
 * The report and charts come from the same code a run uses (bench/lib/report/), so a layout change reaches the
 * committed results without re-running a 15-minute schedule; seed.json also gives README.md's results table
 * (between its bench-summary markers). Usage: `npm run gen:report -- [name …]` (default seed); `--check` exits 1
 * when a report, chart or the README's table differs from what its JSON gives.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchResults } from '../bench/lib/report/analyze.js';
import { writeCharts } from '../bench/lib/report/charts.js';
import { toMarkdown } from '../bench/lib/report/markdown.js';
import { spliceSummary } from '../bench/lib/report/summary.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = join(ROOT, 'bench/results');
const README = join(ROOT, 'README.md');

interface SavedRun extends BenchResults {
  meta: { commit: string; date: string; wallS: number; command: string };
}

function loadRun(name: string): SavedRun {
  return JSON.parse(readFileSync(join(RESULTS, `${name}.json`), 'utf8')) as SavedRun;
}

/** README.md as the seed run's results give it: the bench-summary block rendered from seed.json. */
export function renderReadme(readme = readFileSync(README, 'utf8')): string {
  const { meta: _meta, ...results } = loadRun('seed');
  return spliceSummary(readme, results);
}

/** The report of `name` and its charts (file name → SVG), rendered from bench/results/<name>.json. */
export async function renderReport(name: string): Promise<{ markdown: string; charts: Map<string, string> }> {
  const { meta, ...results } = loadRun(name);
  const dir = mkdtempSync(join(tmpdir(), 'kinf-report-'));
  try {
    const files = await writeCharts(results, dir, name);
    const charts = new Map(files.map((f) => [basename(f), readFileSync(f, 'utf8')]));
    const md = toMarkdown(
      results,
      meta.command,
      meta,
      [...charts.keys()].map((f) => `charts/${f}`),
    );
    return { markdown: `${md}\n`, charts };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const check = args.includes('--check');
  const names = args.filter((a) => !a.startsWith('--'));
  const stale: string[] = [];
  for (const name of names.length > 0 ? names : ['seed']) {
    const { markdown, charts } = await renderReport(name);
    const out = new Map([[`${name}.md`, markdown]]);
    for (const [f, svg] of charts) out.set(`charts/${f}`, svg);
    for (const [rel, content] of out) {
      const path = join(RESULTS, rel);
      if (existsSync(path) && readFileSync(path, 'utf8') === content) continue;
      if (check) stale.push(`bench/results/${rel}`);
      else {
        writeFileSync(path, content);
        process.stdout.write(`wrote bench/results/${rel}\n`);
      }
    }
  }
  const readme = readFileSync(README, 'utf8');
  const fresh = renderReadme(readme);
  if (fresh !== readme) {
    if (check) stale.push('README.md (bench-summary)');
    else {
      writeFileSync(README, fresh);
      process.stdout.write('wrote README.md (bench-summary)\n');
    }
  }
  if (stale.length > 0) {
    process.stderr.write(`stale benchmark reports (run npm run gen:report): ${stale.join(', ')}\n`);
    process.exit(1);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
