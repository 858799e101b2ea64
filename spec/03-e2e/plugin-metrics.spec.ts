import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL } from '../02-integration/emulator/emulator-fleet.js';
import { postChat, startFullSystem, type FullSystem } from '../helpers/full-system.js';
import { freePort, waitFor } from '../helpers/ports.js';

/**
 * The plugin's decision metrics end to end, with no policies section (they are always on): requests through
 * the Kong stand-in and the real plugin server to emulated pods; the plugin server flushes its counts to Redis
 * (every 5 s, the default); `kinference collector` (a real process on the same Redis and key prefix) exports
 * them on its /metrics.
 */

const PREFIX = 'kinf-e2e-pm';

/** The value of one sample line (exact name and labels), or 0 when absent. */
function sample(text: string, series: string): number {
  const l = text.split('\n').find((x) => x.startsWith(series + ' '));
  return l === undefined ? 0 : Number(l.slice(series.length + 1));
}

describe('decision metrics: stand-in, plugin server, Redis, collector /metrics', { timeout: 180_000 }, () => {
  let sys: FullSystem;
  let dir: string;
  let proc: ChildProcess | null = null;
  let exited: Promise<unknown> = Promise.resolve();
  let listen = '';

  beforeAll(async () => {
    sys = await startFullSystem(PREFIX);
    dir = mkdtempSync(join(tmpdir(), 'kinf-e2e-pm-'));
    // A collector reading the same Redis and prefix; it owns another model (the spec's in-process collector
    // writes the index of MODEL), so it holds its own writer lease and exports the plugin series.
    listen = `127.0.0.1:${await freePort()}`;
    const config = join(dir, 'fleet.yaml');
    writeFileSync(
      config,
      [
        `redis_url: ${sys.redis.url}`,
        `redis_key_prefix: ${PREFIX}`,
        'models:',
        '  metrics-reader: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: 16 }',
        'pods:',
        '  - id: idle',
        '    model: metrics-reader',
        '    address: 127.0.0.1:9',
        `    kv_events: tcp://127.0.0.1:${await freePort()}`,
        'collector:',
        `  listen: ${listen}`,
        '',
      ].join('\n'),
    );
    proc = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'collector', '--config', config], {
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    exited = new Promise((r) => proc!.once('exit', r));
  }, 120_000);
  afterAll(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await exited;
    }
    await sys?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('counts routed decisions, a fallback, prompt and cached tokens, route time and both TTFTs', async () => {
    const system = 'You answer questions about the tides and the moon. '.repeat(30);
    for (let i = 0; i < 5; i++) {
      const res = await postChat(sys.gw.url, {
        model: MODEL,
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: `Question ${i}: why two tides a day?` },
        ],
        stream: true,
        max_tokens: 20,
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    // Not JSON: Kong keeps its target (the route's service url), reason body_not_json.
    const bad = await postChat(sys.gw.url, '{not json');
    await bad.text();

    const L = `model="${MODEL}",class="(none)"`;
    const routed = `kinference_plugin_decisions_total{${L},outcome="routed",reason="none"}`;
    /** Decisions for MODEL by any outcome: on a loaded host a lookup may time out (routed on load). */
    const decided = (t: string): number =>
      t
        .split('\n')
        .filter((l) => l.startsWith(`kinference_plugin_decisions_total{${L},`))
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    const measured = `kinference_plugin_ttft_seconds_count{${L},kind="measured"}`;
    const fallback = `kinference_plugin_decisions_total{model="(none)",class="(none)",outcome="kong_default",reason="body_not_json"}`;
    // Flushed within one interval (5 s) of the last request, then read at the next scrape (the collector may
    // still be starting on a loaded host).
    const text = await waitFor(
      'the plugin server flushed its decisions and the collector exports them',
      async () => {
        try {
          const t = await (await fetch(`http://${listen}/metrics`)).text();
          // All six: the bad body's decision may be flushed an interval after the others.
          return decided(t) >= 5 && sample(t, routed) >= 1 && sample(t, fallback) >= 1 ? t : null;
        } catch {
          return null;
        }
      },
      60_000,
      200,
    );
    expect(decided(text)).toBe(5);
    const r = sample(text, routed);
    expect(sample(text, fallback)).toBe(1);
    expect(sample(text, `kinference_plugin_prompt_tokens_total{${L}}`)).toBeGreaterThan(5 * 200);
    // The shared system prompt is predicted cached on the chosen pod after the first request.
    expect(sample(text, `kinference_plugin_cached_prompt_tokens_total{${L}}`)).toBeGreaterThan(0);
    // Both TTFTs and their ratio for every request routed on prediction (the same requests).
    expect(sample(text, `kinference_plugin_ttft_seconds_count{${L},kind="predicted"}`)).toBe(r);
    expect(sample(text, measured)).toBe(r);
    expect(sample(text, `kinference_plugin_ttft_seconds_sum{${L},kind="measured"}`)).toBeGreaterThan(0);
    expect(sample(text, `kinference_plugin_ttft_ratio_count{${L}}`)).toBe(r);
    expect(sample(text, 'kinference_plugin_route_seconds_count{outcome="routed"}')).toBe(r);
    expect(sample(text, 'kinference_plugin_route_seconds_bucket{outcome="routed",le="+Inf"}')).toBe(r);
    expect(sample(text, 'kinference_plugin_metrics_flushes_total')).toBeGreaterThan(0);
    expect(sample(text, 'kinference_plugin_metrics_export_up')).toBe(1);
    // No tenant, no pod label on any plugin series.
    expect(
      text.split('\n').filter((l) => l.startsWith('kinference_plugin_') && /tenant=|pod=/.test(l)),
    ).toEqual([]);
  });
});
