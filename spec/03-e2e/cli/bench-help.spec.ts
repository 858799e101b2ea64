import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SCRIPTS = [
  'seed',
  'des',
  'live',
  'fleet',
  'smoke',
  'collector',
  'emulator',
  'index',
  'overhead',
  'plugin',
  'tokenizers',
  'load',
  'fuzz',
  'usage',
  'gateways',
];

const script = (name: string): string =>
  fileURLToPath(new URL(`../../../dist/bench/${name}.js`, import.meta.url));

// Every benchmark as a user types it: `--help` says what it does and runs nothing (a benchmark that ignored its
// arguments started on `--help` and overwrote its committed results), a wrong option is a usage error.
// One process per test: each start of a bench script (seconds of module loading on a loaded machine) gets
// the whole per-test budget; seven starts in one test outran it.
describe('bench:* command lines', () => {
  let cwd: string;
  const run = (name: string, args: string[]) =>
    spawnSync(process.execPath, [script(name), ...args], { cwd, encoding: 'utf8', timeout: 30_000 });

  beforeAll(() => {
    cwd = mkdtempSync(join(tmpdir(), 'kinf-bench-help-'));
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it.each(SCRIPTS)('bench:%s --help prints its usage, exits 0 and writes nothing', (name) => {
    const r = run(name, ['--help']);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(`npm run bench:${name}`);
    expect(readdirSync(cwd)).toEqual([]);
  });

  it.each(SCRIPTS.filter((n) => n !== 'load'))(
    'bench:%s --bogus is a usage error (exit 2, the message and the usage, no stack trace)',
    (name) => {
      const r = run(name, ['--bogus']);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^bench:${name}: Unknown option '--bogus'`));
      expect(r.stderr).toContain(`npm run bench:${name}`);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(readdirSync(cwd)).toEqual([]);
    },
  );

  it.each<[string, string[], RegExp]>([
    ['des', ['--trials', 'x'], /--trials x: expected a whole number ≥ 1/],
    ['des', ['--arms', 'random,nope'], /unknown arm nope/],
    ['des', ['--rates', 'multiturn=fast'], /--rates multiturn=fast: expected a rate ≥ 0/],
    ['des', ['--concurrency', '4,0'], /--concurrency 0: expected a whole number ≥ 1/],
    ['des', ['--emulator-profile', 'a100'], /--emulator-profile a100: one of l40s-27b-fp8, h100-27b-fp8/],
    ['live', ['--arms', 'oracle'], /unknown live arm oracle/],
    ['live', ['--arms', 'kinference-slo'], /--arms kinference-slo needs --time-scale 1 \(got 2\)/],
  ])('bench:%s %j is rejected (exit 2), naming the flag', (name, args, message) => {
    const r = run(name, args);
    expect(r.status, args.join(' ')).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(readdirSync(cwd)).toEqual([]);
  });

  it.each(
    (
      [
        ['index', 'KINF_BENCH_ENTRIES'],
        ['index', 'KINF_BENCH_LOOKUPS'],
        ['overhead', 'KINF_BENCH_WARM'],
        ['emulator', 'KINF_BENCH_LIVE'],
        ['plugin', 'KINF_BENCH_REQUESTS'],
        ['tokenizers', 'KINF_BENCH_WARM'],
        ['collector', 'KINF_BENCH_SECONDS'],
      ] as const
    ).flatMap(([name, variable]) => ['x', '0', '2.5'].map((v) => [name, variable, v] as const)),
  )('bench:%s with %s=%s, not a whole number ≥ 1, stops before it starts (exit 2)', (name, variable, v) => {
    const r = spawnSync(process.execPath, [script(name)], {
      cwd,
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, [variable]: v },
    });
    expect(r.status, v).toBe(2);
    expect(r.stderr).toContain(`bench:${name}: ${variable}=${v}: expected a whole number ≥ 1`);
    expect(readdirSync(cwd)).toEqual([]);
  });
});
