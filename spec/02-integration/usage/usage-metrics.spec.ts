import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerUsageMetrics, usageSeriesNames } from '../../../src/collector/metrics/usage-metrics.js';
import { UsageWriter, createUsageRedis, type UsageEvent } from '../../../src/usage/index.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

const event = (tenant: string, serviceClass: string, ttftMs: number): UsageEvent => ({
  atMs: Date.now(),
  tenant,
  serviceClass,
  model: 'm',
  shed: false,
  promptTokens: 100,
  cachedTokens: 64,
  output: { tokens: 10, exact: false, streamed: true },
  ttftMs,
  cost: { cost: 0.5, saving: 0.25 },
});

describe("the collector's usage series: fleet totals per class and model from Redis at scrape time", () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
    // Two Kong nodes' writers, each its own connection: the totals are the fleet's.
    for (const n of [0, 1]) {
      const c = createUsageRedis({ url: redis.url });
      const w = new UsageWriter(c, { keyPrefix: 'p', retentionDays: 1 });
      await w.record(event(`tenant-${n}`, 'interactive', 80));
      await w.record(event(`other-${n}`, 'batch', 3000));
      c.disconnect();
    }
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('exports counters and a TTFT histogram labelled by class and model, never tenant', async () => {
    const reg = new Registry();
    const client = createUsageRedis({ url: redis.url });
    registerUsageMetrics(reg, { client, keyPrefix: 'p', exporting: () => true });
    const text = await reg.metrics();
    expect(text).toContain('kinference_usage_requests_total{class="interactive",model="m"} 2');
    expect(text).toContain('kinference_usage_requests_total{class="batch",model="m"} 2');
    expect(text).toContain('kinference_usage_cached_prompt_tokens_total{class="batch",model="m"} 128');
    expect(text).toContain(
      'kinference_usage_output_tokens_total{class="batch",model="m",kind="estimated"} 20',
    );
    expect(text).toContain('kinference_usage_cost_total{class="interactive",model="m"} 1');
    expect(text).toContain('kinference_usage_ttft_seconds_bucket{class="interactive",model="m",le="0.1"} 2');
    expect(text).toContain('kinference_usage_ttft_seconds_bucket{class="batch",model="m",le="2.5"} 0');
    expect(text).toContain('kinference_usage_ttft_seconds_bucket{class="batch",model="m",le="5"} 2');
    expect(text).toContain('kinference_usage_ttft_seconds_bucket{class="batch",model="m",le="+Inf"} 2');
    expect(text).toContain('kinference_usage_ttft_seconds_count{class="batch",model="m"} 2');
    expect(text).toContain('# TYPE kinference_usage_ttft_seconds histogram');
    expect(text).toContain('kinference_usage_export_up 1');
    expect(text).not.toContain('tenant');
    for (const name of usageSeriesNames()) expect(text).toContain(name);
    client.disconnect();
  });

  it('a standby collector (writer lease held elsewhere) exports none of them: a sum over collectors counts once', async () => {
    const reg = new Registry();
    const client = createUsageRedis({ url: redis.url });
    registerUsageMetrics(reg, { client, keyPrefix: 'p', exporting: () => false });
    const text = await reg.metrics();
    expect(text).not.toMatch(/^kinference_usage_\w+(\{| )/m);
    client.disconnect();
  });

  it('Redis unreachable: /metrics still answers, export_up 0 and no usage values', async () => {
    const reg = new Registry();
    const client = createUsageRedis({ url: 'redis://127.0.0.1:1' }, 200);
    client.on('error', () => {});
    registerUsageMetrics(reg, { client, keyPrefix: 'p', exporting: () => true });
    const text = await reg.metrics();
    expect(text).toContain('kinference_usage_export_up 0');
    expect(text).not.toMatch(/^kinference_usage_requests_total/m);
    client.disconnect();
  });
});
