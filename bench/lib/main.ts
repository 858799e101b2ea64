import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { scheduleFromArgs } from './cli-args.js';
import { idleUncachedTtftMs } from './des/idle-ttft.js';
import { fleetOf } from './des/worker.js';
import { analyze, type BenchResults } from './report/analyze.js';
import { writeCharts } from './report/charts.js';
import { toMarkdown } from './report/markdown.js';
import { runSchedule } from './runner.js';
import type { BenchSchedule } from './schedule.js';
import { loadModelSetup, type ModelSetup } from './setup.js';
import type { Slo } from './stats/goodput.js';
import type { WorkloadName } from './types.js';

/** Mean prompt tokens of a workload's requests (content tokens; the template adds a handful). */
export function meanPromptTokens(s: BenchSchedule, w: WorkloadName): number {
  const sh = s.shapes;
  switch (w) {
    case 'control':
      return sh.control.promptTokens;
    case 'shared-prefix':
      return sh['shared-prefix'].prefixTokens + sh['shared-prefix'].promptTokens;
    case 'multiturn': {
      const m = sh.multiturn;
      let total = 0;
      for (let k = 0; k < m.turns; k++) total += m.firstPromptTokens + k * (m.promptTokens + m.outputTokens);
      return Math.round(total / m.turns);
    }
  }
}

/** The SLO as the study set it: idle uncached TTFT (measured on the emulator) plus padding, and an ITL bound. */
export function sloFor(s: BenchSchedule, m: ModelSetup): Record<WorkloadName, Slo> {
  const fleet = fleetOf(s, m);
  const out = {} as Record<WorkloadName, Slo>;
  for (const w of s.workloads) {
    const n = meanPromptTokens(s, w);
    const idle =
      idleUncachedTtftMs(fleet.pod, n) + s.latency.requestOverheadMs + s.latency.responseOverheadMs;
    out[w] = {
      ttftMs: Math.round(idle * (1 + s.slo.ttftPadding)),
      itlMs: s.slo.itlMs,
      basis: `idle uncached TTFT of a ${n.toLocaleString('en')}-token prompt (${(idle / 1000).toFixed(2)} s) + ${Math.round(s.slo.ttftPadding * 100)}%`,
    };
  }
  return out;
}

function gitCommit(): string {
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
  const model = await loadModelSetup();
  const slo = sloFor(s, model);
  const cells = await runSchedule(s, { workers: opts.workers, progress: opts.progress, model });
  const results = analyze(s, cells, slo);
  const meta = {
    commit: gitCommit(),
    date: new Date().toISOString(),
    wallS: (performance.now() - wall0) / 1000,
  };
  const markdown = toMarkdown(results, opts.command, meta);
  const files: string[] = [];
  if (opts.resultsDir !== undefined) {
    mkdirSync(opts.resultsDir, { recursive: true });
    const json = join(opts.resultsDir, `${s.name}.json`);
    writeFileSync(
      json,
      JSON.stringify({ meta: { ...meta, command: opts.command, mode: 'des' }, ...results }, null, 1) + '\n',
    );
    const md = join(opts.resultsDir, `${s.name}.md`);
    writeFileSync(md, markdown + '\n');
    files.push(json, md);
    if (opts.charts !== false)
      files.push(...(await writeCharts(results, join(opts.resultsDir, 'charts'), s.name)));
  }
  return { results, markdown, files };
}

/**
 * The body of `bench:seed` and `bench:des`: the schedule from the command line over `base`, run with a
 * progress bar, the table printed. The results record the exact command: the npm script runs the compiled
 * file, tsx runs the source directly.
 */
export async function runBenchScript(base: BenchSchedule, script: string, moduleUrl: string): Promise<void> {
  const argv = process.argv.slice(2);
  const { schedule, workers } = scheduleFromArgs(base, argv);
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
}
