import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { streamChat } from '../../../bench/lib/live/http-client.js';
import { MODEL_NAME } from '../../../bench/lib/setup.js';

const fleet = fileURLToPath(new URL('../../../dist/bench/fleet.js', import.meta.url));

// `npm run bench:fleet`: the emulated fleet kept up for bench:load, with a kube-proxy Service and the Kong route.
describe('bench:fleet', () => {
  it('serves the Service and the kinference route until Ctrl-C, then stops everything it started', async () => {
    const child = spawn(
      process.execPath,
      [fleet, '--time-scale', '20', '--pods', '2', '--emulator-profile', 'h100-27b-fp8'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('close', r));
    try {
      const ready = await Promise.race([
        new Promise<string>((resolve) => {
          const check = (): void => {
            if (/kinference\s+http\S+\n/.test(out)) resolve(out);
            else setTimeout(check, 100);
          };
          check();
        }),
        exited.then((code) => {
          throw new Error(`bench:fleet exited with ${code} before it was ready:\n${out}`);
        }),
      ]);
      const url = (name: string): URL => new URL(new RegExp(`${name}\\s+(http\\S+)`).exec(ready)![1]!);
      const body = JSON.stringify({
        model: MODEL_NAME,
        messages: [{ role: 'user', content: 'hello there' }],
        max_tokens: 4,
        stream: true,
        stream_options: { include_usage: true },
      });
      for (const name of ['service', 'kinference']) {
        const u = url(name);
        const t = await streamChat(u.hostname, Number(u.port), body, u.pathname);
        expect(t, name).toMatchObject({ ok: true, status: 200, outputTokens: 4 });
      }
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    expect(out).toMatch(/stopping \(service connections per pod: pod-0 \d+, pod-1 \d+\)/);
    expect(out).toContain('2 emulated pods (h100-27b-fp8, 163840 KV tokens each)');
  }, 90_000);
  it('refuses an unknown emulator profile and names the known ones', async () => {
    const child = spawn(process.execPath, [fleet, '--emulator-profile', 'a100-nope'], { stdio: 'pipe' });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    expect(await new Promise((r) => child.on('close', r))).toBe(2);
    expect(err).toContain('--emulator-profile a100-nope: one of l40s-27b-fp8, h100-27b-fp8');
  });
  it('refuses admission settings the plugin does not have, before starting anything', async () => {
    const child = spawn(
      process.execPath,
      [
        fleet,
        '--admission-ttft-ms',
        '7000',
        '--admission-itl-ms',
        '100',
        '--admission-config',
        '{"itl_decode_from_metric":false}',
      ],
      { stdio: 'pipe' },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    expect(await new Promise((r) => child.on('close', r))).toBe(2);
    expect(err).toContain('--admission-config: not plugin settings: itl_decode_from_metric');
  });
});
