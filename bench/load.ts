/**
 * `npm run bench:load -- --url URL --model NAME --workload W (--rate R | --concurrency N) [...]`: the
 * benchmark's GuideLLM-shaped load generator alone, against any OpenAI-compatible endpoint (your Kong route,
 * your Kubernetes Service, one pod). Writes <out-dir>/<name>.{json,md}. `--compare A.json B.json` prints the
 * published-style table of B against A with bootstrap CIs. `--help` lists every option.
 */
// First: `--help` answers before the rest loads.
import './lib/load/help-first.js';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import {
  LOAD_USAGE,
  parseLoadArgs,
  randomSalt,
  recordedCommand,
  UsageError,
  type CompareOptions,
  type LoadOptions,
} from './lib/load/options.js';
import {
  compareLoads,
  comparisonMarkdown,
  loadMarkdown,
  summarizeLoad,
  type LoadCell,
  type LoadResultsFile,
} from './lib/load/report.js';
import { LoadFailure, measureSlo, runLoad, type LoadRun } from './lib/load/run-load.js';
import { gitCommit } from './lib/main.js';
import { loadTextSynth } from './lib/setup.js';
import { profileDurationS, profileLabel, type RequestRecord } from './lib/types.js';

const tenth = (x: number): number => Math.round(x * 10) / 10;
const roundTimes = (r: RequestRecord): RequestRecord => ({
  ...r,
  startMs: tenth(r.startMs),
  firstTokenMs: r.firstTokenMs === null ? null : tenth(r.firstTokenMs),
  lastTokenMs: r.lastTokenMs === null ? null : tenth(r.lastTokenMs),
  endMs: r.endMs === null ? null : tenth(r.endMs),
});

function redact(url: URL): string {
  const u = new URL(url.href);
  u.username = '';
  u.password = '';
  return u.href;
}

async function compare(o: CompareOptions, argv: string[]): Promise<void> {
  const read = (f: string): LoadResultsFile => {
    let x: LoadResultsFile | null;
    try {
      x = JSON.parse(readFileSync(f, 'utf8')) as LoadResultsFile | null;
    } catch (e) {
      // A missing or unreadable file is said plainly, not as a stack trace.
      throw new LoadFailure(`${f}: ${(e as Error).message}`);
    }
    if (x?.meta?.tool !== 'bench:load') throw new LoadFailure(`${f}: not a bench:load results file`);
    return x;
  };
  const [a, b] = [read(o.compare[0]), read(o.compare[1])];
  let md: string;
  try {
    md = comparisonMarkdown(compareLoads(a, b, o.resamples), a, b, recordedCommand(argv));
  } catch (e) {
    throw new LoadFailure(`cannot compare ${o.compare[0]} with ${o.compare[1]}: ${(e as Error).message}`);
  }
  console.log(md);
  if (o.name) {
    mkdirSync(o.outDir, { recursive: true });
    const file = join(o.outDir, `${o.name}.md`);
    writeFileSync(file, md + '\n');
    console.log(`\nwrote ${file}`);
  }
}

async function load(o: LoadOptions, argv: string[]): Promise<number> {
  const wall0 = performance.now();
  // A tokenizer that cannot be read is a wrong option, said as one, not a stack trace.
  const synth = await loadTextSynth(o.tokenizerJson).catch((e: unknown) => {
    throw new UsageError(`--tokenizer ${o.tokenizerJson ?? '(bundled)'}: ${(e as Error).message}`);
  });
  const slo = await measureSlo(o, synth);
  console.error(`SLO: TTFT ≤ ${(slo.ttftMs / 1000).toFixed(2)} s (${slo.basis}), ITL ≤ ${slo.itlMs} ms`);

  const interrupt = new AbortController();
  const onSigint = (): void => {
    if (interrupt.signal.aborted) process.exit(130);
    console.error('\ninterrupted: waiting for the requests in flight (Ctrl-C again to quit now)');
    interrupt.abort('interrupted');
  };
  process.on('SIGINT', onSigint);
  const bar = new cliProgress.SingleBar(
    {
      format: ' {bar} {value}/{total} s | {profile}, run {trial} | {ok} ok, {failed} failed, {shed} 429',
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 30_000,
    },
    cliProgress.Presets.shades_classic,
  );
  let t0 = performance.now();
  let totalS = 0;
  const counts = { ok: 0, failed: 0, shed: 0 };
  const tick = setInterval(
    () => bar.update(Math.min(totalS, Math.round((performance.now() - t0) / 1000))),
    1000,
  );
  const cells: LoadCell[] = [];
  let sweepFailure: string | null = null;
  let started = false;
  try {
    for (const [i, profile] of o.profiles.entries()) {
      if (interrupt.signal.aborted) break;
      // No run, of this profile or another of the sweep, may find an earlier one's prompts cached.
      const salts = Array.from({ length: o.trials }, (_, t) => (i === 0 && t === 0 ? o.salt : randomSalt()));
      const label =
        o.profiles.length > 1
          ? `${profileLabel(profile)} (${i + 1}/${o.profiles.length})`
          : profileLabel(profile);
      let runs: LoadRun[];
      try {
        runs = await runLoad(o, profile, salts, synth, {
          signal: interrupt.signal,
          onTrial: (trial) => {
            t0 = performance.now();
            totalS = profileDurationS(profile);
            const payload = { trial: trial + 1, profile: label, ...counts };
            if (!started) bar.start(totalS, 0, payload);
            else {
              bar.setTotal(totalS);
              bar.update(0, payload);
            }
            started = true;
          },
          onSettled: (rec, t) => {
            // Cancelled at the end of a run: incomplete, not failed.
            if (rec.status === 'incomplete') return;
            if (t.ok) counts.ok++;
            else if (t.status === 429) counts.shed++;
            else counts.failed++;
            bar.update(counts);
          },
        });
      } catch (e) {
        // A later profile of a sweep that fails must not lose the profiles measured before it.
        if (!(e instanceof LoadFailure) || cells.length === 0) throw e;
        sweepFailure = `${profileLabel(profile)} failed: ${e.message}`;
        break;
      }
      cells.push({
        profile,
        salts,
        summary: summarizeLoad(runs, slo, o.workload, o.shapes),
        runs: runs.map((r) => ({ ...r, records: r.records.map(roundTimes) })),
      });
    }
  } finally {
    clearInterval(tick);
    bar.stop();
    process.off('SIGINT', onSigint);
  }
  const aborted = sweepFailure ?? cells.flatMap((c) => c.runs).find((r) => r.aborted)?.aborted ?? null;
  const results: LoadResultsFile = {
    meta: {
      tool: 'bench:load',
      command: recordedCommand(argv),
      date: new Date().toISOString(),
      commit: gitCommit(),
      url: redact(o.url),
      model: o.model,
      workload: o.workload,
      shapes: o.shapes,
      trials: o.trials,
      seed: o.seed,
      salt: o.salt,
      headers: Object.keys(o.headers),
      wallS: (performance.now() - wall0) / 1000,
      aborted,
    },
    slo,
    cells,
  };
  mkdirSync(o.outDir, { recursive: true });
  const json = join(o.outDir, `${o.name}.json`);
  const mdFile = join(o.outDir, `${o.name}.md`);
  writeFileSync(json, JSON.stringify(results, null, 1) + '\n');
  const md = loadMarkdown(results);
  writeFileSync(mdFile, md + '\n');
  console.log(md);
  console.log(`\nwrote ${json}, ${mdFile}`);
  if (interrupt.signal.aborted) return 130;
  if (sweepFailure !== null) {
    console.error(`bench:load: ${sweepFailure} (the profiles before it are written)`);
    return 1;
  }
  return cells.length > 0 && cells.every((c) => c.summary.measured > 0) ? 0 : 1;
}

const argv = process.argv.slice(2);
try {
  const o = parseLoadArgs(argv);
  if ('compare' in o) await compare(o, argv);
  else process.exitCode = await load(o, argv);
} catch (e) {
  if (e instanceof UsageError) {
    console.error(`bench:load: ${e.message}\n\n${LOAD_USAGE}`);
    process.exitCode = 2;
  } else if (e instanceof LoadFailure) {
    console.error(`bench:load: ${e.message}`);
    process.exitCode = 1;
  } else throw e;
}
