import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  OVERFLOW_TENANT,
  UsageWriter,
  createUsageRedis,
  readFleetTotals,
  readUsage,
  type UsageEvent,
} from '../../../src/usage/index.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

const AT = Date.UTC(2026, 11, 6, 23, 30);
const event = (over: Partial<UsageEvent> = {}): UsageEvent => ({
  atMs: AT,
  tenant: 'team-a',
  serviceClass: 'interactive',
  model: 'm',
  shed: false,
  promptTokens: 1000,
  cachedTokens: 600,
  output: { tokens: 120, exact: false, streamed: true },
  ttftMs: 180,
  cost: { cost: 0.0025, saving: 0.0012 },
  ...over,
});

describe('usage records in Redis: per tenant, model and UTC hour; fleet totals per class and model', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('counts requests, tokens by type, TTFT buckets, cost and saving; integers stay integers', async () => {
    const client = createUsageRedis({ url: redis.url });
    const w = new UsageWriter(client, { keyPrefix: 'k1', retentionDays: 2 });
    expect(await w.record(event())).toBe(true);
    expect(await w.record(event({ ttftMs: 4000, cost: { cost: null, saving: null } }))).toBe(true);
    expect(await w.record(event({ shed: true }))).toBe(true);
    expect(
      await w.record(event({ atMs: AT + 3_600_000, output: { tokens: 0, exact: true, streamed: false } })),
    ).toBe(true);
    const rows = await readUsage(client, 'k1', AT - 1, AT + 3_600_000);
    expect(rows.map((r) => [r.hour, r.tenant, r.model])).toEqual([
      ['2026120623', 'team-a', 'm'],
      ['2026120700', 'team-a', 'm'],
    ]);
    const t = rows[0]!.totals;
    expect(t).toMatchObject({
      requests: 3,
      shed: 1,
      prompt_tokens: 2000,
      cached_tokens: 1200,
      output_tokens_estimated: 240,
      output_tokens_exact: 0,
      ttft_count: 2,
      ttft_sum_ms: 4180,
      ttft_le_250: 1,
      ttft_le_5000: 1,
      unpriced: 1,
    });
    expect(t.cost).toBeCloseTo(0.0025, 12);
    expect(t.saving).toBeCloseTo(0.0012, 12);
    expect(rows[1]!.totals.output_tokens_exact).toBe(0);
    // A TTL of usage_retention_days on every key of the hour.
    const keys = await redis.client.keys('k1:usage:{k1:2026120623}:*');
    expect(keys.length).toBe(3);
    for (const k of keys) {
      const ttl = await redis.client.ttl(k);
      expect(ttl).toBeGreaterThan(2 * 86400 - 60);
      expect(ttl).toBeLessThanOrEqual(2 * 86400);
    }
    const fleet = await readFleetTotals(client, 'k1');
    expect(fleet).toHaveLength(1);
    expect(fleet[0]).toMatchObject({ serviceClass: 'interactive', model: 'm' });
    expect(fleet[0]!.totals.requests).toBe(4);
    client.disconnect();
  });

  it('past the cap of distinct tenants per hour, new tenants are counted under the overflow tenant', async () => {
    const client = createUsageRedis({ url: redis.url });
    const w = new UsageWriter(client, { keyPrefix: 'k2', retentionDays: 1, maxTenantsPerHour: 3 });
    const own: boolean[] = [];
    for (let i = 0; i < 10; i++) own.push(await w.record(event({ tenant: `rotating-${i}` })));
    // A tenant already counted this hour keeps its own record.
    own.push(await w.record(event({ tenant: 'rotating-1' })));
    expect(own).toEqual([true, true, true, false, false, false, false, false, false, false, true]);
    const rows = await readUsage(client, 'k2', AT, AT);
    expect(rows.map((r) => [r.tenant, r.totals.requests])).toEqual([
      [OVERFLOW_TENANT, 7],
      ['rotating-0', 1],
      ['rotating-1', 2],
      ['rotating-2', 1],
    ]);
    expect(await redis.client.scard('k2:usage:{k2:2026120623}:tenants')).toBe(3);
    client.disconnect();
  });

  it('Redis down: record rejects at once (nothing queued in memory)', async () => {
    const client = createUsageRedis({ url: 'redis://127.0.0.1:1' }, 200);
    client.on('error', () => {});
    const w = new UsageWriter(client, { keyPrefix: 'k3', retentionDays: 1 });
    await expect(w.record(event())).rejects.toThrow();
    await expect(w.record(event())).rejects.toThrow();
    client.disconnect();
  });
});
