import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { descendantPids } from '../../../harness/kill-descendants.js';
import { waitFor } from '../../helpers/ports.js';

/**
 * A bench stopped by a signal (CI's timeout on a smoke run) kills what it started: before this, a timed-out
 * bench:plugin left its redis-server and plugin servers running for the rest of the suite.
 */

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('killDescendantsOnSignal (harness/kill-descendants.ts)', () => {
  it('SIGTERM to a bench kills its children and grandchildren, and the bench exits 143', async () => {
    // A stand-in bench: installs the handler, starts a child that starts a grandchild, then waits.
    const script = `
      import { spawn } from 'node:child_process';
      import { killDescendantsOnSignal } from './harness/kill-descendants.ts';
      killDescendantsOnSignal();
      spawn('sh', ['-c', 'sleep 60 & sleep 60'], { stdio: 'ignore' });
      setInterval(() => {}, 1000);
    `;
    const bench = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: 'ignore',
    });
    try {
      const started = await waitFor(
        'the child and grandchild',
        () => {
          const d = descendantPids(bench.pid!);
          return d.length >= 3 ? d : null;
        },
        30_000,
      );
      const exited = once(bench, 'exit');
      bench.kill('SIGTERM');
      const [code, signal] = (await exited) as [number | null, string | null];
      expect({ code, signal }).toEqual({ code: 143, signal: null });
      await waitFor('every descendant gone', () => started.every((p) => !alive(p)), 10_000);
    } finally {
      if (bench.exitCode === null) bench.kill('SIGKILL');
    }
  }, 60_000);
});
