// Every `kinference` command answers `--help` with its usage and exit 0, without starting anything (issue #34;
// the timings are in docs/cli.md, not asserted here). The bench scripts' `--help` is bench-help.spec.ts.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../../../bin/kinference.js', import.meta.url));
const COMMANDS = [
  'collector',
  'demo',
  'emulator',
  'explain',
  'gateway',
  'usage',
  'validate',
  'verify-tokenizer',
];

describe('kinference <command> --help', () => {
  it('the program lists every command', () => {
    const r = spawnSync(process.execPath, [cli, '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(0);
    for (const c of COMMANDS) expect(r.stdout).toMatch(new RegExp(`^  ${c}\\b`, 'm'));
  });

  it.each(COMMANDS)('%s --help prints its usage and exits 0', (command) => {
    const r = spawnSync(process.execPath, [cli, command, '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`Usage: kinference ${command} [options]`);
    expect(r.stderr).toBe('');
  });
});
