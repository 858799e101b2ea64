import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));

/** `npm start` runs this command: the whole local fleet, both arms, the table, then a clean exit. */
describe('kinference demo', () => {
  it('runs a small schedule end to end and prints the side-by-side table', () => {
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
      ],
      { encoding: 'utf8', timeout: 180_000 },
    );
    expect(r.status, r.stderr.slice(-2000)).toBe(0);
    expect(r.stdout).toMatch(/\| median TTFT\s+\|/);
    expect(r.stdout).toMatch(/\| mean TTFT\s+\|/);
    expect(r.stdout).toMatch(/\| requests ok \/ failed\s+\|\s+6 \/ 0 \|\s+6 \/ 0 \|/);
    expect(r.stdout).toContain('Where to look next');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+:\d+/); // no stack trace
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
