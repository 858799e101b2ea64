import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { freePort, waitFor } from '../../helpers/ports.js';

const ROOT = new URL('../../../', import.meta.url).pathname;

function run(args: string[]) {
  const p = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'emulator', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => p.once('exit', (code) => resolve(code)));
  return { p, exited, output: () => out };
}

describe('kinference emulator (CLI, child process)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kinf-emu-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function fleetFile(profile = 'h100-27b-fp8'): Promise<{ file: string; ports: number[] }> {
    const ports = [await freePort(), await freePort(), await freePort()];
    const file = join(dir, `fleet-${ports[0]}.yaml`);
    writeFileSync(
      file,
      stringify({
        models: { tiny: { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml', block_size: 16 } },
        pods: [
          {
            id: 'a',
            model: 'tiny',
            address: `127.0.0.1:${ports[0]}`,
            kv_events: `tcp://127.0.0.1:${ports[1]}`,
          },
          { id: 'b', model: 'tiny', address: `127.0.0.1:${ports[2]}` },
        ],
        emulator: { profile, time_scale: 100 },
      }),
    );
    return { file, ports };
  }

  it('serves only the selected pod and stops cleanly on SIGTERM', async () => {
    const { file, ports } = await fleetFile();
    const emu = run(['--config', file, '--pod', 'a']);
    try {
      await waitFor(
        'pod a /health',
        async () => (await fetch(`http://127.0.0.1:${ports[0]}/health`)).ok,
        30_000,
        100,
      );
      const res = await fetch(`http://127.0.0.1:${ports[0]}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'tiny',
          messages: [{ role: 'user', content: 'hello' }],
          max_tokens: 3,
        }),
      });
      expect(res.status).toBe(200);
      await expect(fetch(`http://127.0.0.1:${ports[2]}/health`)).rejects.toThrow();
      expect(emu.output()).toMatch(/\[a\] http:\/\/127\.0\.0\.1:\d+ \(tiny\)/);
      expect(emu.output()).toMatch(/profile h100-27b-fp8, time_scale 100/);
    } finally {
      emu.p.kill('SIGTERM');
    }
    expect(await emu.exited).toBe(0);
  });

  it.each([
    ['HTTP port', 0, (port: number) => `127.0.0.1:${port}`],
    ['KV-event endpoint', 1, (port: number) => `tcp://127.0.0.1:${port}`],
  ] as const)(
    "exits 2 naming the address when a pod's %s is taken, without a stack trace",
    async (_what, i, address) => {
      const { file, ports } = await fleetFile();
      const busy = createServer();
      await new Promise<void>((r) => busy.listen(ports[i], '127.0.0.1', () => r()));
      try {
        const emu = run(['--config', file, '--pod', 'a']);
        expect(await emu.exited).toBe(2);
        expect(emu.output()).toContain(
          `kinference: ${file}: ${address(ports[i]!)}: address already in use: another process listens there`,
        );
        expect(emu.output()).not.toMatch(/\n\s+at /);
      } finally {
        await new Promise((r) => busy.close(r));
      }
    },
  );

  it('exits 2 with a message for an unknown profile', async () => {
    const { file } = await fleetFile('no-such-gpu');
    const emu = run(['--config', file]);
    expect(await emu.exited).toBe(2);
    expect(emu.output()).toMatch(/emulator\.profile: unknown profile "no-such-gpu"/);
  });
});
