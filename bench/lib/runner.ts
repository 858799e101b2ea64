// Runs every cell of a schedule in virtual time, in worker processes, with a progress bar.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import cliProgress from 'cli-progress';
import { loadModelSetup, type ModelSetup } from './setup.js';
import { profilesOf, type BenchSchedule } from './schedule.js';
import { profileLabel } from './types.js';
import { runSpec, type CellOutput, type CellSpec } from './des/worker.js';

export function enumerateCells(s: BenchSchedule): CellSpec[] {
  const cells: CellSpec[] = [];
  for (let trial = 0; trial < s.trials; trial++)
    for (const workload of s.workloads)
      for (const profile of profilesOf(s, workload))
        for (const arm of s.arms) cells.push({ id: cells.length, workload, profile, arm, trial });
  return cells;
}

function cellName(c: CellSpec): string {
  return `${c.workload} ${profileLabel(c.profile)} ${c.arm} t${c.trial}`;
}

/**
 * Runs every cell of a schedule in virtual time, in `workers` child processes (0 = in this process),
 * with a progress bar on stderr when it is a terminal or `progress` is set.
 */
export async function runSchedule(
  s: BenchSchedule,
  opts: { workers: number; progress: boolean; model?: ModelSetup },
): Promise<CellOutput[]> {
  const cells = enumerateCells(s);
  const bar = opts.progress
    ? new cliProgress.SingleBar(
        {
          format: ' {bar} {value}/{total} cells | {eta_formatted} left | {cell}',
          hideCursor: true,
          etaBuffer: 20,
          // Also when stderr is a file or pipe (CI logs): a line every 30 s instead of a redraw.
          noTTYOutput: true,
          notTTYSchedule: 30_000,
        },
        cliProgress.Presets.shades_classic,
      )
    : null;
  bar?.start(cells.length, 0, { cell: '' });
  const out: CellOutput[] = new Array(cells.length);
  try {
    if (opts.workers <= 0) {
      const model = opts.model ?? (await loadModelSetup());
      for (const c of cells) {
        bar?.update({ cell: cellName(c) });
        out[c.id] = await runSpec(s, model, c);
        bar?.increment();
      }
      return out;
    }
    const here = fileURLToPath(import.meta.url);
    const workerPath = here.replace(/runner\.(ts|js)$/, 'des/worker.$1');
    const execArgv = here.endsWith('.ts') ? ['--import', 'tsx'] : [];
    // Longest cells first (oracle and high concurrency), so no worker is left with a long tail.
    const weight = (c: CellSpec): number =>
      (c.arm === 'oracle' ? 3 : c.arm.startsWith('kinference') ? 2 : 1) *
      (c.profile.kind === 'concurrent' ? c.profile.streams : 8);
    const queue = [...cells].sort((a, b) => weight(b) - weight(a));
    const children: ChildProcess[] = [];
    await Promise.all(
      Array.from({ length: Math.min(opts.workers, cells.length) }, async () => {
        const child = fork(workerPath, ['--bench-worker'], {
          execArgv,
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        children.push(child);
        for (;;) {
          const c = queue.shift();
          if (!c) break;
          bar?.update({ cell: cellName(c) });
          const reply = await new Promise<{ ok: true; out: CellOutput } | { ok: false; error: string }>(
            (resolve, reject) => {
              child.once('message', (m) => resolve(m as never));
              child.once('exit', (code) => reject(new Error(`bench worker exited with ${code}`)));
              child.send({ schedule: s, cell: c });
            },
          );
          child.removeAllListeners('exit');
          if (!reply.ok) throw new Error(`cell ${cellName(c)} failed:\n${reply.error}`);
          out[c.id] = reply.out;
          bar?.increment();
        }
        child.send({ exit: true });
      }),
    ).finally(() => {
      for (const ch of children) if (ch.exitCode === null) ch.kill();
    });
    return out;
  } finally {
    bar?.stop();
  }
}
