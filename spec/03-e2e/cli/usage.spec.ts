// `kinference usage` spawned (cli/main.ts under tsx) against a real Redis holding records the writer put there.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageWriter, createUsageRedis, type UsageEvent } from '../../../src/usage/index.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

const main = fileURLToPath(new URL('../../../cli/main.ts', import.meta.url));
const H = Date.UTC(2026, 11, 6, 10, 15);

function run(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', main, 'usage', ...args], { stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    p.stderr.on('data', (d: Buffer) => (stderr += String(d)));
    p.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

const event = (tenant: string, model: string, atMs: number, over: Partial<UsageEvent> = {}): UsageEvent => ({
  atMs,
  tenant,
  serviceClass: 'standard',
  model,
  shed: false,
  promptTokens: 1000,
  cachedTokens: 250,
  output: { tokens: 100, exact: false, streamed: true },
  ttftMs: 300,
  cost: { cost: 0.01, saving: 0.002 },
  ...over,
});

describe('kinference usage (spawned, real Redis)', { timeout: 180_000 }, () => {
  let redis: TestRedis;
  let dir: string;
  let fleet: string;
  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'kinf-usage-'));
    fleet = join(dir, 'fleet.yaml');
    const fleetDoc = {
      redis_url: redis.url,
      redis_key_prefix: 'fleet1',
      models: { m1: { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml' } },
      pods: [{ id: 'p', model: 'm1', address: '127.0.0.1:1' }],
    };
    writeFileSync(fleet, stringify(fleetDoc));
    writeFileSync(join(dir, 'down.yaml'), stringify({ ...fleetDoc, redis_url: 'redis://127.0.0.1:1' }));
    const client = createUsageRedis({ url: redis.url });
    const w = new UsageWriter(client, { keyPrefix: 'fleet1', retentionDays: 3660 });
    await w.record(event('team-a', 'm1', H));
    await w.record(event('team-a', 'm1', H + 3_600_000, { ttftMs: 2000 }));
    await w.record(event('team-b', 'm1', H, { shed: true }));
    await w.record(event('team-b', 'm2', H, { cost: { cost: null, saving: null } }));
    client.disconnect();
  });
  afterAll(async () => {
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const range = ['--from', '2026-12-06T00:00Z', '--to', '2026-12-06T23:59Z'];

  it('JSON by tenant: sums over hours and models, the total, marks estimated output and incomplete cost', async () => {
    const r = await run(['--config', fleet, ...range, '--by', 'tenant', '--format', 'json']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { rows: Record<string, unknown>[]; total: Record<string, unknown> };
    expect(out.rows.map((x) => [x.tenant, x.requests, x.shed, x.prompt_tokens, x.output_tokens])).toEqual([
      ['team-a', 2, 0, 2000, 200],
      ['team-b', 2, 1, 1000, 100],
    ]);
    expect(out.rows[0]).toMatchObject({
      cached_prompt_tokens: 500,
      cache_hit_ratio: 0.25,
      output_tokens_estimated: 200,
      ttft_p50_le_ms: 500,
      ttft_p95_le_ms: 2500,
      cost: 0.02,
      cost_complete: true,
    });
    expect(out.rows[1]).toMatchObject({ unpriced_requests: 1, cost_complete: false });
    expect(out.total).toMatchObject({ requests: 4, shed: 1 });
  });

  it('CSV by model and hour; table by tenant', async () => {
    const csv = await run(['--config', fleet, ...range, '--by', 'model,hour', '--format', 'csv']);
    expect(csv.status).toBe(0);
    const lines = csv.stdout.trim().split('\n');
    expect(lines[0]!.startsWith('model,hour,requests,shed,prompt_tokens')).toBe(true);
    expect(lines.slice(1).map((l) => l.split(',').slice(0, 3).join(','))).toEqual([
      'm1,2026120610,2',
      'm1,2026120611,1',
      'm2,2026120610,1',
    ]);
    const table = await run(['--config', fleet, ...range]);
    expect(table.status).toBe(0);
    expect(table.stdout).toMatch(/^tenant\s+model\s+requests/);
    expect(table.stdout).toMatch(/team-a\s+m1\s+2\s+0\s+2000\s+500\s+25\.0\s+~200/);
  });

  it('clear errors naming the option, exit 2; Redis unreachable names the Redis', async () => {
    const bad = async (args: string[], msg: RegExp) => {
      const r = await run(['--config', fleet, ...args]);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(msg);
    };
    await bad(['--from', 'yesterday'], /--from: "yesterday" is not a time \(expected ISO 8601/);
    await bad(['--by', 'tenant,pod'], /--by: "pod" is not a grouping \(expected tenant, model or hour/);
    await bad(['--format', 'xml'], /--format: "xml" is not a format \(expected table, json or csv\)/);
    await bad(['--from', '2026-12-06', '--to', '2026-12-05'], /--to .* is before --from/);
    const down = await run(['--config', join(dir, 'down.yaml'), '--format', 'json']);
    expect(down.status).toBe(2);
    expect(down.stderr).toMatch(/cannot read usage records from Redis at redis:\/\/127\.0\.0\.1:1/);
  });
});
