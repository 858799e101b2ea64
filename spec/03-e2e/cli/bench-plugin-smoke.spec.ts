import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../../../dist/bench/plugin.js', import.meta.url));

interface Stats {
  n: number;
  p50: number;
}

// bench:plugin as CI runs it: a few requests per configuration through the real kong-js-pluginserver.
describe('bench:plugin, small (KINF_BENCH_REQUESTS)', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'kinf-bench-plugin-'));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it('times every path and routes each 64 KB body to the pod holding its prefix, in 4 PDK calls', () => {
    const r = spawnSync(process.execPath, [script], {
      cwd,
      encoding: 'utf8',
      timeout: 150_000,
      env: { ...process.env, KINF_BENCH_REQUESTS: '10' },
    });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(readFileSync(join(cwd, 'bench/results/plugin.json'), 'utf8')) as {
      path64k: { server: string; pdkCalls: number; chosenTarget: string; handleEventToRetMs: Stats }[];
      routing64kInProcess: Record<string, Record<string, Stats>>;
      bodySizes: { bodyBytes: number; stock: { totalMs: Stats } }[];
      transportOnly: { bodyBytes: number; stock: Stats }[];
    };
    expect(out.path64k.length).toBeGreaterThanOrEqual(2); // Qwen3 on the stock server, o200k; + patched
    for (const p of out.path64k) {
      expect(p.pdkCalls, p.server).toBe(4);
      expect(p.chosenTarget, p.server).toBe('10.0.0.8'); // pod-b holds the shared system prompt
      expect(p.handleEventToRetMs.n).toBeGreaterThanOrEqual(2);
      expect(p.handleEventToRetMs.p50).toBeGreaterThan(0);
    }
    expect(Object.keys(out.routing64kInProcess.qwen3!)).toEqual(
      expect.arrayContaining(['tokenizeMs', 'lookupMs', 'predictMs']),
    );
    expect(out.bodySizes.map((b) => b.stock.totalMs.n).every((n) => n >= 2)).toBe(true);
    expect(out.transportOnly).toHaveLength(out.bodySizes.length);
  }, 180_000);
});
