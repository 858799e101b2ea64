import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { ROOT } from './repo.js';

/** Runs a command in the repository root; never throws (the caller checks `status`). */
export function run(cmd: string, args: string[], input?: string): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', input, timeout: 60_000 });
}

/** True when `cmd args` runs and exits 0 (e.g. `docker compose version`). */
export function works(cmd: string, args: string[]): boolean {
  const r = run(cmd, args);
  return r.error === undefined && r.status === 0;
}
