// Runs a benchmark schedule and writes bench/results/<name>.{json,md} and charts (bench:seed, bench:des).
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { scheduleFromArgs, scheduleUsage } from './cli-args.js';
import { orUsage } from './cli.js';
import type { BenchResults } from './report/analyze.js';
import type { BenchSchedule } from './schedule.js';

export function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

export interface BenchOutput {
  results: BenchResults;
  markdown: string;
  files: string[];
}

/** Runs a schedule in virtual time and writes bench/results/<name>.json, .md and charts. */
export async function runBench(
  s: BenchSchedule,
  opts: { command: string; workers: number; progress: boolean; resultsDir?: string; charts?: boolean },
): Promise<BenchOutput> {
  const wall0 = performance.now();
  // The engine, the tokenizer and the report load when a schedule runs, not for `--help` (~1.5 s of imports).
  const [{ analyze }, { writeCharts }, { toMarkdown }, { runSchedule }, { loadModelSetup }, { sloFor }] =
    await Promise.all([
      import('./report/analyze.js'),
      import('./report/charts.js'),
      import('./report/markdown.js'),
      import('./runner.js'),
      import('./setup.js'),
      import('./slo.js'),
    ]);
  const model = await loadModelSetup();
  const slo = sloFor(s, model);
  const cells = await runSchedule(s, { workers: opts.workers, progress: opts.progress, model });
  const results = analyze(s, cells, slo);
  const meta = {
    commit: gitCommit(),
    date: new Date().toISOString(),
    wallS: (performance.now() - wall0) / 1000,
  };
  const files: string[] = [];
  if (opts.resultsDir === undefined)
    return { results, markdown: toMarkdown(results, opts.command, meta), files };
  mkdirSync(opts.resultsDir, { recursive: true });
  const json = join(opts.resultsDir, `${s.name}.json`);
  writeFileSync(
    json,
    JSON.stringify({ meta: { ...meta, command: opts.command, mode: 'des' }, ...results }, null, 1) + '\n',
  );
  // Charts first: the report shows them, by paths relative to itself.
  const charts =
    opts.charts === false ? [] : await writeCharts(results, join(opts.resultsDir, 'charts'), s.name);
  const markdown = toMarkdown(
    results,
    opts.command,
    meta,
    charts.map((f) => `charts/${basename(f)}`),
  );
  const md = join(opts.resultsDir, `${s.name}.md`);
  writeFileSync(md, markdown + '\n');
  files.push(json, md, ...charts);
  return { results, markdown, files };
}

/**
 * The body of `bench:seed` and `bench:des`: the schedule from the command line over `base`, run with a
 * progress bar, the table printed. The results record the exact command: the npm script runs the compiled
 * file, tsx runs the source directly.
 */
export async function runBenchScript(base: BenchSchedule, script: string, moduleUrl: string): Promise<void> {
  const argv = process.argv.slice(2);
  const name = `bench:${script}`;
  const { schedule, workers } = orUsage(name, scheduleUsage(name, base), () =>
    scheduleFromArgs(base, argv, name),
  );
  const command = moduleUrl.endsWith('.ts')
    ? [`npx tsx bench/${script}.ts`, ...argv]
    : [`npm run bench:${script}`, ...(argv.length ? ['--', ...argv] : [])];
  const out = await runBench(schedule, {
    command: command.join(' '),
    workers,
    progress: true,
    resultsDir: 'bench/results',
  });
  console.log(out.markdown);
  console.log(`\nwrote ${out.files.join(', ')}`);
  if (schedule.name === 'seed')
    console.log("README.md's results table comes from seed.json: `npm run gen:report` rewrites it.");
}
