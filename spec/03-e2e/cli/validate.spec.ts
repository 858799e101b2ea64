// `kinference validate` as CI runs it (built CLI): exit status, the lines on stderr, --json on stdout.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../../../bin/kinference.js', import.meta.url));
const run = (args: string[]) =>
  spawnSync(process.execPath, [cli, 'validate', ...args], { encoding: 'utf8', timeout: 30_000 });

describe('kinference validate (built CLI)', () => {
  let dir: string;
  let bad: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kinf-validate-cli-'));
    bad = join(dir, 'kong.yaml');
    writeFileSync(
      bad,
      [
        '_format_version: "3.0"',
        'services:',
        '  - name: vllm',
        '    url: http://vllm:8000',
        '    routes:',
        '      - name: chat',
        '        paths: ["/v1/chat/completions"]',
        '        plugins:',
        '          - name: kinference',
        '            config:',
        '              tokenizer: "hf:Qwen/Qwen3-8B"',
        '              redis_url: 127.0.0.1:6390',
        '',
      ].join('\n'),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("exits 0 with a one-line summary per file on the repository's own files", () => {
    const r = run([
      'kong/kong.yaml',
      'deploy/kubernetes/kong/kongplugin.yaml',
      'deploy/compose/fleet.vllm.yaml',
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'kong/kong.yaml: 1 kinference plugin entry valid (Kong declarative file)',
      'deploy/kubernetes/kong/kongplugin.yaml: 1 kinference plugin entry valid (KongPlugin manifest)',
      'deploy/compose/fleet.vllm.yaml: 1 model valid (fleet file)',
    ]);
  });

  it('exits 1 naming the file, line, route and field, and what is expected in words', () => {
    const r = run([bad]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `${bad}:12: service "vllm" › route "chat" (services[0].routes[0].plugins[0]): config.redis_url: expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS (got "127.0.0.1:6390")`,
    );
    expect(r.stderr).toContain(`${bad}: 1 problem in 1 kinference plugin entry (Kong declarative file)`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('--json gives CI the same findings on stdout', () => {
    const r = run(['--json', bad]);
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({
      ok: false,
      files: [
        {
          file: bad,
          kind: 'kong',
          entries: 1,
          problems: [
            {
              where: 'service "vllm" › route "chat" (services[0].routes[0].plugins[0])',
              field: 'config.redis_url',
              line: 12,
              message: expect.stringMatching(/^expected a Redis URL/),
            },
          ],
        },
      ],
    });
  });
});
