// A bench's results file: the host facts every run records, and the JSON written under bench/results.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { cpus, loadavg } from 'node:os';

/** When and where a run was measured (this machine is shared: its load average is part of every figure). */
export function hostMeta(): { date: string; node: string; cpus: number; loadavg1mAtEnd: number } {
  return {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    loadavg1mAtEnd: Math.round(loadavg()[0]! * 100) / 100,
  };
}

/** Writes `value` as indented JSON to `path` (its folder made if missing). */
export function writeResultFile(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}
