// On SIGTERM/SIGINT, a bench kills every process it started (plugin servers, redis-servers) before it exits.
import { execFileSync } from 'node:child_process';

/** Every descendant of `root` (children, their children, …), from `ps`. */
export function descendantPids(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const line of execFileSync('ps', ['-A', '-o', 'pid=,ppid='], { encoding: 'utf8' }).split('\n')) {
    const [pid, ppid] = line.trim().split(/\s+/).map(Number);
    if (!pid || ppid === undefined || !Number.isFinite(ppid)) continue;
    const l = children.get(ppid);
    if (l) l.push(pid);
    else children.set(ppid, [pid]);
  }
  const out: number[] = [];
  const todo = [...(children.get(root) ?? [])];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    out.push(pid);
    todo.push(...(children.get(pid) ?? []));
  }
  return out;
}

/**
 * A bench killed by a signal (a CI timeout, Ctrl-C) would leave its plugin servers and redis-servers running:
 * a benchmark's `finally` blocks do not run on a signal. This kills its descendants and exits 128 + signal.
 * The ps scan runs only on the signal.
 */
export function killDescendantsOnSignal(): void {
  const onSignal = (signal: NodeJS.Signals): void => {
    try {
      for (const pid of descendantPids(process.pid))
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
    } finally {
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}
