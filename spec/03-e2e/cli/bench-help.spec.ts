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
];

const script = (name: string): string =>
  fileURLToPath(new URL(`../../../dist/bench/${name}.js`, import.meta.url));

// Every benchmark as a user types it: `--help` says what it does and runs nothing (a benchmark that ignored its
// arguments started on `--help` and overwrote its committed results), a wrong option is a usage error.
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

  it('bench:des rejects values it cannot run with, naming the flag', () => {
    const cases: [string[], RegExp][] = [
      [['--trials', 'x'], /--trials x: expected a whole number ≥ 1/],
      [['--arms', 'random,nope'], /unknown arm nope/],
      [['--rates', 'multiturn=fast'], /--rates multiturn=fast: expected a rate ≥ 0/],
      [['--concurrency', '4,0'], /--concurrency 0: expected a whole number ≥ 1/],
      [['--emulator-profile', 'a100'], /--emulator-profile a100: one of l40s-27b-fp8, h100-27b-fp8/],
    ];
    for (const [args, message] of cases) {
      const r = run('des', args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect(run('live', ['--arms', 'oracle']).stderr).toMatch(/unknown live arm oracle/);
    const slo = run('live', ['--arms', 'kinference-slo']);
    expect(slo.status).toBe(2);
    expect(slo.stderr).toMatch(/--arms kinference-slo needs --time-scale 1 \(got 2\)/);
    expect(readdirSync(cwd)).toEqual([]);
  });

  it.each([
    ['index', 'KINF_BENCH_ENTRIES'],
    ['index', 'KINF_BENCH_LOOKUPS'],
    ['overhead', 'KINF_BENCH_WARM'],
    ['emulator', 'KINF_BENCH_LIVE'],
    ['plugin', 'KINF_BENCH_REQUESTS'],
    ['tokenizers', 'KINF_BENCH_WARM'],
    ['collector', 'KINF_BENCH_SECONDS'],
  ])('bench:%s with %s that is not a whole number ≥ 1 stops before it starts (exit 2)', (name, variable) => {
    for (const v of ['x', '0', '2.5']) {
      const r = spawnSync(process.execPath, [script(name)], {
        cwd,
        encoding: 'utf8',
        timeout: 30_000,
        env: { ...process.env, [variable]: v },
      });
      expect(r.status, v).toBe(2);
      expect(r.stderr).toContain(`bench:${name}: ${variable}=${v}: expected a whole number ≥ 1`);
    }
    expect(readdirSync(cwd)).toEqual([]);
  });
});
