import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../helpers/ports.js';

// Room for runCollector's kill timer: the subject is the message, not how fast a loaded host starts a process.
vi.setConfig({ testTimeout: 90_000 });

/** `kinference collector --config <yaml>` as an operator runs it: exit code and stderr. */
function runCollector(
  config: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'collector', '--config', config], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env,
    });
    let stderr = '';
    p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    // Each run starts tsx and the collector's imports: tens of seconds on a loaded 2-core CI host.
    const timer = setTimeout(() => p.kill('SIGKILL'), 80_000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

const fleet = (pod: string[], collector: string[]): string =>
  [
    'redis_url: redis://127.0.0.1:1/0', // never reached: every case fails before connecting
    'models:',
    '  M/test: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: 16 }',
    'pods:',
    '  - id: a',
    '    model: M/test',
    '    address: 127.0.0.1:18000',
    ...pod.map((l) => `    ${l}`),
    'collector:',
    ...collector.map((l) => `  ${l}`),
    '',
  ].join('\n');

describe('kinference collector: configuration errors are one message and exit 2, no stack trace', () => {
  let dir: string;
  let busy: Server;
  let busyPort: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kinf-collector-cfg-'));
    busyPort = await freePort();
    busy = createServer();
    await new Promise<void>((r) => busy.listen(busyPort, '127.0.0.1', () => r()));
  });
  afterAll(async () => {
    await new Promise((r) => busy.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  const cases: [string, string, string][] = [
    [
      'an unknown pod key',
      fleet(['kv_event: tcp://127.0.0.1:5557'], ['listen: 127.0.0.1:0']),
      'pods.0.kv_event: unknown key; did you mean "kv_events"?',
    ],
    [
      'an unknown collector key',
      fleet([], ['scrape_intervall_ms: 100', 'listen: 127.0.0.1:0']),
      'collector.scrape_intervall_ms: unknown key; did you mean "scrape_interval_ms"?',
    ],
    [
      'a listen address without a port',
      fleet([], ['listen: not-an-address']),
      'collector.listen: not in the expected form (got "not-an-address")',
    ],
    [
      'an endpoint without a numeric port',
      fleet(['kv_events: tcp://127.0.0.1:notaport'], ['listen: 127.0.0.1:0']),
      'pods.0.kv_events: not in the expected form (got "tcp://127.0.0.1:notaport")',
    ],
    [
      'retry min above max',
      fleet([], ['listen: 127.0.0.1:0', 'index_retry_min_ms: 10000', 'index_retry_max_ms: 10']),
      'collector.index_retry_min_ms: 10000 is greater than index_retry_max_ms (10)',
    ],
  ];
  it.each(cases)('%s', async (name, yaml, expected) => {
    const file = join(dir, `${name.replace(/\W+/g, '-')}.yaml`);
    writeFileSync(file, yaml);
    const { code, stderr } = await runCollector(file);
    expect(code).toBe(2);
    expect(stderr.startsWith(`kinference: ${file}: invalid configuration\n`)).toBe(true);
    expect(stderr).toContain(`\n  ${expected}`);
    expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('a listen port already in use', async () => {
    const file = join(dir, 'busy.yaml');
    writeFileSync(file, fleet([], [`listen: 127.0.0.1:${busyPort}`]));
    const { code, stderr } = await runCollector(file);
    expect(code).toBe(2);
    expect(stderr).toBe(
      `kinference: ${file}: collector.listen 127.0.0.1:${busyPort}: address already in use: another process listens there (pick another port, or 0 for a free one)\n`,
    );
  });

  describe('kubernetes: discovery without usable credentials', () => {
    const k8sFleet = (collector: string[] = []): string =>
      [
        'redis_url: redis://127.0.0.1:1/0',
        'models:',
        '  M/test: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: 16 }',
        'kubernetes: { namespace: llm, service: vllm, model: M/test }',
        'collector:',
        '  listen: 127.0.0.1:0',
        ...collector.map((l) => `  ${l}`),
        '',
      ].join('\n');
    // No KUBECONFIG and an empty HOME: only an explicit kubeconfig or in-cluster credentials could apply.
    const bareEnv = (): NodeJS.ProcessEnv => {
      const env: NodeJS.ProcessEnv = { ...process.env, HOME: dir };
      delete env.KUBECONFIG;
      return env;
    };

    it('a collector.kubeconfig file that does not exist', async () => {
      const file = join(dir, 'k8s-missing.yaml');
      const kc = join(dir, 'no-such-kubeconfig');
      writeFileSync(file, k8sFleet([`kubeconfig: ${kc}`]));
      const { code, stderr } = await runCollector(file, bareEnv());
      expect(code).toBe(2);
      expect(stderr).toContain(`kinference: ${file}: kubernetes: collector.kubeconfig ${kc}: ENOENT`);
      expect(stderr).not.toMatch(/\n\s+at /);
    });

    it('a kubeconfig without a current cluster', async () => {
      const file = join(dir, 'k8s-nocluster.yaml');
      const kc = join(dir, 'kubeconfig-empty');
      writeFileSync(kc, 'apiVersion: v1\nkind: Config\n');
      writeFileSync(file, k8sFleet());
      const { code, stderr } = await runCollector(file, { ...bareEnv(), KUBECONFIG: kc });
      expect(code).toBe(2);
      expect(stderr).toContain(`kinference: ${file}: kubernetes: ${kc}: no current cluster`);
      expect(stderr).not.toMatch(/\n\s+at /);
    });

    it.skipIf(existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token'))(
      'no kubeconfig anywhere and not in a cluster',
      async () => {
        const file = join(dir, 'k8s-none.yaml');
        writeFileSync(file, k8sFleet());
        const { code, stderr } = await runCollector(file, bareEnv());
        expect(code).toBe(2);
        expect(stderr).toContain(`kinference: ${file}: kubernetes: no credentials: set collector.kubeconfig`);
        expect(stderr).not.toMatch(/\n\s+at /);
      },
    );
  });
});
