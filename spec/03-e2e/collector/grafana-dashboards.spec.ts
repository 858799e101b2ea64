import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Prediction } from '../../../src/core/predictor.js';
import { PluginMetricsFlusher, PluginMetricsRecorder } from '../../../src/plugin-metrics/index.js';
import { emptyOutcome, type RouteOutcome } from '../../../src/router/index.js';
import { UsageWriter, createUsageRedis } from '../../../src/usage/index.js';
import { BS, MODEL, freshTokens } from '../../helpers/collector/collector-harness.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

/**
 * Every Grafana dashboard in deploy/grafana names only series that `kinference collector` really exports: a real
 * collector process on a real Redis, a pod publishing KV events and serving vLLM metrics, usage records and
 * plugin decision counts written by the real writers; the series names are those of /metrics' sample lines
 * (a series registered but never given a value does not count).
 */

const DIR = fileURLToPath(new URL('../../../deploy/grafana/', import.meta.url));
const PREFIX = 'kgd';

/** Every PromQL string of a dashboard: targets' expr and the variables' queries. */
function queries(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => queries(n, out));
  else if (node && typeof node === 'object')
    for (const [k, v] of Object.entries(node)) {
      if ((k === 'expr' || k === 'query') && typeof v === 'string') out.push(v);
      else if (k === 'query' && v && typeof v === 'object' && 'query' in v) out.push(String(v.query));
      else queries(v, out);
    }
  return out;
}

/** The names of the sample lines of a Prometheus text exposition. */
function sampleNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    out.add(/^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0]);
  }
  return out;
}

const chosen = {
  podId: 'pod-g',
  predictedTtftMs: 90,
  cachedTokens: 64,
  cpuTokens: 0,
} as unknown as Prediction;
const routed: RouteOutcome = {
  ...emptyOutcome('body_empty', ''),
  fallbackReason: null,
  model: MODEL,
  promptTokens: 200,
  target: { host: '127.0.0.1', port: 1, podId: 'pod-g' },
  decision: { candidates: [chosen], chosen, fallbackReason: null },
};

describe('deploy/grafana dashboards against a running collector', { timeout: 120_000 }, () => {
  let redis: TestRedis;
  let pub: FakeVllmPublisher;
  let pod: Server;
  let dir: string;
  let proc: ChildProcess | null = null;
  let exited: Promise<unknown> = Promise.resolve();

  beforeAll(async () => {
    redis = await startRedis();
    pub = await new FakeVllmPublisher({ format: 'map' }, { topic: 'kv' }).bind();
    // The pod's /metrics, so the collector scrapes it (health, calibration).
    pod = createServer((_, res) => res.end(vllmExposition({ '0': { running: 1, waiting: 0, kv: 0.2 } })));
    await new Promise<void>((r) => pod.listen(0, '127.0.0.1', r));
    dir = mkdtempSync(join(tmpdir(), 'kinf-dashboards-'));
  });
  afterAll(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await exited;
    }
    await pub?.close();
    await new Promise((r) => pod?.close(r));
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every query names a series on /metrics, and none groups by tenant', async () => {
    // What the Kong nodes' plugins write: a usage record (policies) and decision counts (always).
    const client = createUsageRedis({ url: redis.url });
    await new UsageWriter(client, { keyPrefix: PREFIX, retentionDays: 1 }).record({
      atMs: Date.now(),
      tenant: 't',
      serviceClass: 'standard',
      model: MODEL,
      shed: false,
      promptTokens: 100,
      cachedTokens: 32,
      output: { tokens: 7, exact: false, streamed: true },
      ttftMs: 90,
      cost: { cost: 0.001, saving: 0.0002 },
    });
    const recorder = new PluginMetricsRecorder();
    recorder.decision(routed);
    recorder.decision({ ...routed, target: null, shed: { status: 429, retryAfterS: 1 } });
    recorder.ttft(routed, 120);
    recorder.count('lost');
    expect(await new PluginMetricsFlusher(client, recorder, { keyPrefix: PREFIX }).flush()).toBe(true);
    client.disconnect();

    const listen = `127.0.0.1:${await freePort()}`;
    const address = pod.address() as { port: number };
    const config = join(dir, 'fleet.yaml');
    writeFileSync(
      config,
      [
        `redis_url: ${redis.url}`,
        `redis_key_prefix: ${PREFIX}`,
        'models:',
        `  ${MODEL}: { tokenizer: "tiktoken:o200k_base", chat_template: chatml, block_size: ${BS} }`,
        'pods:',
        '  - id: pod-g',
        `    model: ${MODEL}`,
        `    address: 127.0.0.1:${address.port}`,
        `    metrics: http://127.0.0.1:${address.port}/metrics`,
        `    kv_events: ${pub.endpoint}`,
        `    kv_events_replay: ${pub.replayEndpoint}`,
        '    kv_events_topic: kv',
        'collector:',
        `  listen: ${listen}`,
        '  scrape_interval_ms: 200',
        '',
      ].join('\n'),
    );
    proc = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'collector', '--config', config], {
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    exited = new Promise((r) => proc!.once('exit', r));
    const scrape = async (): Promise<string> => (await fetch(`http://${listen}/metrics`)).text();
    // Subscribed (slow joiner: publish until a batch shows), then one stored block for the write histograms.
    await waitFor(
      'subscribed',
      async () => {
        try {
          if (/kinference_collector_batches_total\{pod="pod-g"\} [1-9]/.test(await scrape())) return true;
        } catch {
          // not listening yet
        }
        await pub.publish([]);
        return false;
      },
      60_000,
      100,
    );
    await pub.publish([
      { type: 'BlockStored', hashes: [1n, 2n], parent: null, tokens: freshTokens(2), blockSize: BS },
    ]);
    let last = '';
    const text = await waitFor(
      'events written, the pod scraped, the plugin and usage series exported',
      async () => {
        const t = (last = await scrape());
        const ready =
          /^kinference_collector_index_write_seconds_count [1-9]/m.test(t) &&
          /^kinference_collector_pod_healthy\{pod="pod-g"\} 1/m.test(t) &&
          /^kinference_plugin_decisions_total\{/m.test(t) &&
          /^kinference_usage_requests_total\{/m.test(t);
        return ready ? t : null;
      },
      30_000,
      100,
    ).catch((e: unknown) => {
      throw new Error(
        `${String(e)}; /metrics had:\n${last
          .split('\n')
          .filter((l) =>
            /index_write_seconds_count|pod_healthy|plugin_decisions|usage_requests|export_up|lease/.test(l),
          )
          .join('\n')}`,
      );
    });
    const exported = sampleNames(text);

    const files = readdirSync(DIR).filter((f) => f.endsWith('.json'));
    expect(files).toEqual(expect.arrayContaining(['kinference-routing.json', 'kinference-usage.json']));
    for (const file of files) {
      const qs = queries(JSON.parse(readFileSync(join(DIR, file), 'utf8')));
      expect(qs.length, file).toBeGreaterThan(10);
      const named = new Set(qs.flatMap((q) => q.match(/\bkinference_[a-z0-9_]+/g) ?? []));
      expect(
        [...named].filter((n) => !exported.has(n)),
        `${file}: series not on /metrics`,
      ).toEqual([]);
      for (const q of qs) expect(q, file).not.toMatch(/tenant|\bpod_id\b/);
    }
    const routing = queries(JSON.parse(readFileSync(join(DIR, 'kinference-routing.json'), 'utf8'))).join(
      '\n',
    );
    expect(routing).toMatch(/kinference_plugin_/);
    expect(routing).toMatch(/kinference_collector_/);
  });
});
