import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerPluginMetrics } from '../../../src/collector/metrics/plugin-metrics.js';
import type { Prediction } from '../../../src/core/predictor.js';
import {
  PluginMetricsFlusher,
  PluginMetricsRecorder,
  pluginMetricsKey,
} from '../../../src/plugin-metrics/index.js';
import { emptyOutcome, type RouteOutcome } from '../../../src/router/index.js';
import { createUsageRedis } from '../../../src/usage/index.js';
import { waitFor } from '../../helpers/ports.js';
import { startRedisCluster } from '../../helpers/redis-cluster.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

/**
 * The plugin servers' flush into a real Redis and the collector's export of the sums: several processes'
 * recorders add to one hash, a restarted process continues the sums (counters never go back), and counts
 * recorded while Redis is down arrive after it is back.
 */

const chosen = { podId: 'p', predictedTtftMs: 100, cachedTokens: 300, cpuTokens: 0 } as unknown as Prediction;
const routed: RouteOutcome = {
  ...emptyOutcome('body_empty', ''),
  fallbackReason: null,
  model: 'm',
  promptTokens: 400,
  target: { host: 'h', port: 1, podId: 'p' },
  decision: { candidates: [chosen], chosen, fallbackReason: null },
};

/** One plugin-server process: its recorder, its own Redis connection and flusher. */
function processOf(url: string, prefix: string) {
  const client = createUsageRedis({ url }, 300);
  client.on('error', () => {});
  const recorder = new PluginMetricsRecorder();
  const flusher = new PluginMetricsFlusher(client, recorder, { keyPrefix: prefix, intervalMs: 60_000 });
  return { client, recorder, flusher, close: () => client.disconnect() };
}

async function scrape(url: string, prefix: string, exporting = true): Promise<string> {
  const reg = new Registry();
  const client = createUsageRedis({ url }, 300);
  client.on('error', () => {});
  registerPluginMetrics(reg, { client, keyPrefix: prefix, exporting: () => exporting });
  try {
    return await reg.metrics();
  } finally {
    client.disconnect();
  }
}

const line = (text: string, series: string): number | undefined => {
  const l = text.split('\n').find((x) => x.startsWith(series + ' '));
  return l === undefined ? undefined : Number(l.slice(series.length + 1));
};

describe('decision metrics: flushed by every plugin server into Redis, summed by the collector', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('two processes flush one batch each; the export sums them; a restarted process continues the sums', async () => {
    const a = processOf(redis.url, 'two');
    const b = processOf(redis.url, 'two');
    try {
      for (let i = 0; i < 3; i++) a.recorder.decision(routed);
      for (let i = 0; i < 2; i++) b.recorder.decision(routed);
      b.recorder.decision({ ...routed, target: null, shed: { status: 429, retryAfterS: 2 } });
      a.recorder.ttft(routed, 180);
      b.recorder.ttft(routed, 90);
      expect(await a.flusher.flush()).toBe(true);
      expect(await b.flusher.flush()).toBe(true);
      expect(a.recorder.size).toBe(0);
      // Bounded: one hash, a handful of fields, whatever the number of requests.
      expect(await redis.client.hlen(pluginMetricsKey('two'))).toBeLessThan(80);

      let text = await scrape(redis.url, 'two');
      const L = 'model="m",class="(none)"';
      expect(line(text, `kinference_plugin_decisions_total{${L},outcome="routed",reason="none"}`)).toBe(5);
      expect(line(text, `kinference_plugin_decisions_total{${L},outcome="shed",reason="none"}`)).toBe(1);
      expect(line(text, `kinference_plugin_shed_requests_total{${L},cause="ttft_slo"}`)).toBe(1);
      expect(line(text, `kinference_plugin_prompt_tokens_total{${L}}`)).toBe(2000);
      expect(line(text, `kinference_plugin_cached_prompt_tokens_total{${L}}`)).toBe(1500);
      expect(line(text, `kinference_plugin_ttft_seconds_count{${L},kind="measured"}`)).toBe(2);
      expect(line(text, `kinference_plugin_ttft_seconds_sum{${L},kind="measured"}`)).toBeCloseTo(0.27, 9);
      expect(line(text, `kinference_plugin_ttft_seconds_bucket{${L},kind="measured",le="0.1"}`)).toBe(1);
      expect(line(text, `kinference_plugin_ttft_ratio_bucket{${L},le="1.25"}`)).toBe(1);
      expect(line(text, `kinference_plugin_ttft_ratio_bucket{${L},le="2"}`)).toBe(2);
      expect(line(text, 'kinference_plugin_metrics_flushes_total')).toBe(2);
      expect(line(text, 'kinference_plugin_metrics_export_up')).toBe(1);
      expect(text).toContain('# TYPE kinference_plugin_route_seconds histogram');

      // A's process restarts: a new recorder, nothing in memory; its counts add to the fleet's sums.
      a.close();
      const a2 = processOf(redis.url, 'two');
      a2.recorder.decision(routed);
      expect(await a2.flusher.flush()).toBe(true);
      a2.close();
      text = await scrape(redis.url, 'two');
      expect(line(text, `kinference_plugin_decisions_total{${L},outcome="routed",reason="none"}`)).toBe(6);
      // Nothing to write: no flush, no round trip.
      expect(await b.flusher.flush()).toBe(true);
      expect(line(await scrape(redis.url, 'two'), 'kinference_plugin_metrics_flushes_total')).toBe(3);
    } finally {
      a.close();
      b.close();
    }
  });

  it('a sum that was fractional takes a whole delta later (HINCRBY on a fractional value fails the flush)', async () => {
    // Seen in the body fuzz: `ERR hash value is not an integer`, the whole delta of that field lost.
    const a = processOf(redis.url, 'frac');
    try {
      a.recorder.ttft(routed, 180.5);
      expect(await a.flusher.flush()).toBe(true);
      // 2 s: a whole delta in the stored unit (seconds).
      a.recorder.ttft(routed, 2000);
      expect(await a.flusher.flush()).toBe(true);
      const text = await scrape(redis.url, 'frac');
      const L = 'model="m",class="(none)"';
      expect(line(text, `kinference_plugin_ttft_seconds_sum{${L},kind="measured"}`)).toBeCloseTo(2.1805, 9);
      expect(line(text, `kinference_plugin_ttft_seconds_count{${L},kind="measured"}`)).toBe(2);
    } finally {
      a.close();
    }
  });

  it('a standby collector exports no plugin series', async () => {
    const text = await scrape(redis.url, 'two', false);
    expect(text).not.toMatch(/^kinference_plugin_\w+(\{| )/m);
  });

  it('Redis down: the flush keeps the counts (bounded) and writes them once Redis is back', async () => {
    const p = processOf(redis.url, 'down');
    try {
      p.recorder.decision(routed);
      expect(await p.flusher.flush()).toBe(true);
      await redis.kill();
      await waitFor('the client sees Redis gone', async () => p.client.status !== 'ready', 5000, 20);
      for (let i = 0; i < 1000; i++) p.recorder.decision(routed);
      const fields = p.recorder.size;
      expect(await p.flusher.flush()).toBe(false);
      for (let i = 0; i < 1000; i++) p.recorder.decision(routed);
      expect(await p.flusher.flush()).toBe(false);
      // 2000 requests while down: the same few fields, not 2000 entries.
      expect(p.recorder.size).toBe(fields);
      // Collector side: /metrics still answers, export_up 0, no plugin values.
      const down = await scrape(redis.url, 'down');
      expect(line(down, 'kinference_plugin_metrics_export_up')).toBe(0);
      expect(down).not.toMatch(/^kinference_plugin_decisions_total/m);

      await redis.restart(); // empty: the Redis lost what it held
      await waitFor('flushed after Redis is back', () => p.flusher.flush(), 10_000, 100);
      const text = await scrape(redis.url, 'down');
      expect(
        line(
          text,
          'kinference_plugin_decisions_total{model="m",class="(none)",outcome="routed",reason="none"}',
        ),
      ).toBe(2000);
    } finally {
      p.close();
    }
  });

  it('on a Redis Cluster: one hash, one slot, the MULTI applies there and the export reads it', async () => {
    const cluster = await startRedisCluster(3);
    const url = await cluster.urlAvoiding('unrelated');
    const client = createUsageRedis({ url, cluster: true }, 2000);
    client.on('error', () => {});
    const reader = createUsageRedis({ url, cluster: true }, 2000);
    reader.on('error', () => {});
    try {
      const recorder = new PluginMetricsRecorder();
      for (let i = 0; i < 7; i++) recorder.decision(routed);
      recorder.ttft(routed, 150);
      const flusher = new PluginMetricsFlusher(client, recorder, { keyPrefix: 'cl' });
      expect(await flusher.flush()).toBe(true);
      const reg = new Registry();
      registerPluginMetrics(reg, { client: reader, keyPrefix: 'cl', exporting: () => true });
      const text = await reg.metrics();
      expect(
        line(
          text,
          'kinference_plugin_decisions_total{model="m",class="(none)",outcome="routed",reason="none"}',
        ),
      ).toBe(7);
      expect(
        line(text, 'kinference_plugin_ttft_seconds_count{model="m",class="(none)",kind="measured"}'),
      ).toBe(1);
      expect(line(text, 'kinference_plugin_metrics_export_up')).toBe(1);
    } finally {
      client.disconnect();
      reader.disconnect();
      await cluster.stop();
    }
  }, 60_000);
});
