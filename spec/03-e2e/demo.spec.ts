import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));

/** `npm start` runs this command: the whole local fleet, both arms, the table, then a clean exit. */
describe('kinference demo', () => {
  it('runs a small schedule end to end and ends with the side-by-side table, the logs in a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kinf-demo-'));
    const logFile = join(dir, 'fleet.log');
    const r = spawnSync(
      process.execPath,
      [
        cli,
        'demo',
        '--requests',
        '6',
        '--concurrency',
        '2',
        '--prefixes',
        '4',
        '--prefix-tokens',
        '2000',
        '--time-scale',
        '10',
        '--log-file',
        logFile,
      ],
      { encoding: 'utf8', timeout: 180_000 },
    );
    const logs = readFileSync(logFile, 'utf8');
    rmSync(dir, { recursive: true, force: true });
    expect(r.status, r.stderr.slice(-2000)).toBe(0);
    expect(r.stdout).toMatch(/\| median TTFT\s+\|/);
    expect(r.stdout).toMatch(/\| mean TTFT\s+\|/);
    expect(r.stdout).toMatch(/\| requests ok \/ failed\s+\|\s+6 \/ 0 \|\s+6 \/ 0 \|/);
    expect(r.stdout).toContain('Where to look next');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+:\d+/); // no stack trace
    // The children's JSON log lines are in the file, named at the start and at the end, not on the terminal.
    expect(logs).toMatch(/^\{"/m);
    expect(r.stderr).not.toMatch(/^\{"/m);
    expect(r.stdout).not.toMatch(/^\{"/m);
    expect(logs).toContain('kinference gateway listening on');
    expect(r.stderr).not.toContain('kinference gateway listening on');
    expect(r.stderr).toContain(`the fleet's logs: ${logFile}`);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
      `  the fleet's logs (emulator, collector, gateway): ${logFile}`,
    );
  }, 200_000);

  it('rejects a bad option with a sentence, not a stack trace', () => {
    const r = spawnSync(process.execPath, [cli, 'demo', '--requests', 'many'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--requests: expected a positive integer, got "many"');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+:\d+/);
  });
});
