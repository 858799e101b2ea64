import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../harness/wait-for.js';
import { RedisLimitStore, TokenLimiter, hashTagOf } from '../../../src/limits/index.js';
import { policiesOf, request, tenantOf, ticketOf } from '../../conformance/limits.js';
import { startRedisCluster } from '../../helpers/redis-cluster.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

/** Four limiters with a connection each: four Kong nodes sharing one Redis. */
function nodes(
  url: string,
  p: unknown,
  prefix: string,
  extra: { cluster?: boolean; timeoutMs?: number } = {},
) {
  const policies = policiesOf({ tenant_from: ['header'], ...(p as object) });
  return Array.from({ length: 4 }, () => {
    const store = new RedisLimitStore({ url, cluster: extra.cluster ?? false });
    return new TokenLimiter({ policies, store, keyPrefix: prefix, timeoutMs: extra.timeoutMs ?? 5000 });
  });
}

describe('token limits shared by four Kong nodes through one Redis', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  const stores = Array.from({ length: 4 }, () => null as unknown as RedisLimitStore);
  beforeAll(() => {
    for (let i = 0; i < 4; i++) stores[i] = new RedisLimitStore({ url: redis.url });
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s?.close()));
  });

  it('a prompt limit is never passed by parallel admissions from four nodes, and refuses only what could not fit (property)', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 20, max: 3000 }),
        fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 10, maxLength: 120 }),
        async (limit, sizes) => {
          const prefix = `exact${++run}`;
          const policies = policiesOf({
            tenant_from: ['header'],
            rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'day', limit }] }],
          });
          // Four nodes: a connection each, one limiter each (the stores outlive the runs).
          const ls = stores.map(
            (store) => new TokenLimiter({ policies, store, keyPrefix: prefix, timeoutMs: 5000 }),
          );
          const t = tenantOf(policies, 'team');
          const verdicts = await Promise.all(
            sizes.map((n, i) => ls[i % 4]!.admit(request(t, { promptTokens: n }))),
          );
          const admitted = sizes.filter((_, i) => verdicts[i]!.admitted).reduce((a, b) => a + b, 0);
          expect(admitted).toBeLessThanOrEqual(limit);
          const keys = await redis.client.keys(`${prefix}:*`);
          expect(keys).toHaveLength(admitted > 0 ? 1 : 0);
          if (keys.length) expect(Number(await redis.client.get(keys[0]!))).toBe(admitted);
          // Counters only grow here: a refused request did not fit even in what was left at the end.
          sizes.forEach((n, i) => {
            if (!verdicts[i]!.admitted) expect(admitted + n).toBeGreaterThan(limit);
          });
        },
      ),
      { numRuns: 25 },
    );
  });

  it('a concurrency cap admits exactly max_concurrent of many parallel requests over four nodes', async () => {
    const ls = nodes(redis.url, { tenants: [{ match: { tenant: 'a' }, max_concurrent: 3 }] }, 'cap');
    const t = tenantOf(ls[0]!.policies, 'a');
    const vs = await Promise.all(Array.from({ length: 40 }, (_, i) => ls[i % 4]!.admit(request(t))));
    const ok = vs.filter((v) => v.admitted);
    expect(ok).toHaveLength(3);
    // One ends on its node; another node may take the slot.
    await ls[0]!.release(ticketOf(ok[0]!));
    expect((await ls[3]!.admit(request(t))).admitted).toBe(true);
    expect((await ls[2]!.admit(request(t))).admitted).toBe(false);
    await Promise.all(ls.map((l) => l.close()));
  });

  it('every key expires, and none holds anything but counters (no prompt text)', async () => {
    const ls = nodes(
      redis.url,
      {
        prices: { m: { input_per_million: 1 } },
        tenants: [{ match: { tenant: 'a' }, max_concurrent: 5, daily_budget: 10 }],
        rate_limits: [
          {
            match: {},
            limits: [
              { tokens: 'prompt', window: 'minute', limit: 1000 },
              { tokens: 'total', window: 'day', limit: 9000 },
            ],
          },
        ],
      },
      'ttl',
    );
    await ls[0]!.admit(request(tenantOf(ls[0]!.policies, 'a'), { estimatedCost: 0.5 }));
    const keys = await redis.client.keys('ttl:*');
    expect(keys).toHaveLength(4);
    for (const k of keys) {
      expect(await redis.client.pttl(k)).toBeGreaterThan(0);
      expect(k).not.toContain('"a"');
    }
    await Promise.all(ls.map((l) => l.close()));
  });
});

describe('Redis down or slow: on_redis_error decides, within redis_timeout_ms', () => {
  it('a killed Redis: allow admits uncounted and says why, deny answers 429', async () => {
    const r = await startRedis();
    const p = { rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'minute', limit: 100 }] }] };
    const [allow] = nodes(r.url, { ...p, on_redis_error: 'allow' }, 'down', { timeoutMs: 300 });
    const [deny] = nodes(r.url, { ...p, on_redis_error: 'deny' }, 'down', { timeoutMs: 300 });
    const t = tenantOf(allow!.policies, 'a');
    expect((await allow!.admit(request(t))).admitted).toBe(true);
    await r.kill();
    const open = await allow!.admit(request(t));
    expect(open).toMatchObject({ admitted: true, ticket: null });
    expect(open.degraded).toMatch(/on_redis_error: allow/);
    const closed = await deny!.admit(request(t));
    expect(closed).toMatchObject({
      admitted: false,
      status: 429,
      code: 'limits_unavailable',
      retryAfterS: 1,
    });
    expect(closed.degraded).toMatch(/on_redis_error: deny/);
    await Promise.all([allow!.close(), deny!.close()]);
  });

  it('a frozen Redis (SIGSTOP): admission returns by the deadline, and the late count is given back when it wakes', async () => {
    const r = await startRedis();
    const pid = Number(/process_id:(\d+)/.exec(await r.client.info('server'))![1]);
    const p = {
      on_redis_error: 'allow',
      tenants: [{ match: { tenant: 'a' }, max_concurrent: 1 }],
      rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'hour', limit: 100 }] }],
    };
    const l = nodes(r.url, p, 'frozen', { timeoutMs: 250 })[0];
    const deny = nodes(r.url, { ...p, on_redis_error: 'deny' }, 'frozen', { timeoutMs: 250 })[0];
    const t = tenantOf(l!.policies, 'a');
    await l!.admit(request(t, { promptTokens: 1 })).then((v) => l!.release(ticketOf(v)));
    await deny!.admit(request(t, { promptTokens: 1 })).then((v) => deny!.release(ticketOf(v)));
    process.kill(pid, 'SIGSTOP');
    try {
      const started = performance.now();
      const [open, closed] = await Promise.all([
        l!.admit(request(t, { promptTokens: 40 })),
        deny!.admit(request(t, { promptTokens: 40 })),
      ]);
      const waited = performance.now() - started;
      expect(open).toMatchObject({ admitted: true, ticket: null });
      expect(open.degraded).toMatch(/did not answer within redis_timeout_ms \(250 ms\)/);
      expect(closed).toMatchObject({ admitted: false, code: 'limits_unavailable' });
      // A bound, not a figure: the deadline holds with a frozen server.
      expect(waited).toBeLessThan(250 + 1500);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // The frozen admissions ran when Redis woke; the limiter gave them back: nothing counted, no slot held.
    const check = new RedisLimitStore({ url: r.url });
    await waitFor('the late admissions given back', async () => {
      const keys = await r.client.keys('frozen:*');
      const counts = await Promise.all(
        keys.map(async (k) =>
          (await r.client.type(k)) === 'zset' ? r.client.zcard(k) : Number(await r.client.get(k)),
        ),
      );
      return counts.every((c) => c === 0);
    });
    expect((await l!.admit(request(t, { promptTokens: 100 }))).admitted).toBe(true);
    await Promise.all([l!.close(), deny!.close(), check.close()]);
    await r.stop();
  });
});

describe('Redis Cluster', () => {
  it('one tenant’s counters, cap and budget share one slot; a shared (per: all) policy is all-or-nothing across slots', async () => {
    const c = await startRedisCluster(3);
    try {
      const ls = nodes(
        c.nodes[0]!.url,
        {
          prices: { m: { input_per_million: 1 } },
          tenants: [{ match: { tenant: 'a' }, max_concurrent: 5, daily_budget: 10 }],
          rate_limits: [
            {
              match: {},
              limits: [
                { tokens: 'prompt', window: 'minute', limit: 1000 },
                { tokens: 'output', window: 'hour', limit: 1000 },
              ],
            },
            {
              match: { model: 'shared' },
              per: 'all',
              limits: [{ tokens: 'prompt', window: 'minute', limit: 50 }],
            },
          ],
        },
        'cl',
        { cluster: true },
      );
      const t = tenantOf(ls[0]!.policies, 'a');
      ticketOf(await ls[0]!.admit(request(t, { promptTokens: 30, maxTokens: 5, estimatedCost: 1 })));
      const keys = (await Promise.all(c.nodes.map((n) => n.admin.keys('cl:*')))).flat();
      expect(keys).toHaveLength(4); // prompt/minute, output/hour, budget, slot
      expect(new Set(await Promise.all(keys.map((k) => c.slotOf(k)))).size).toBe(1);
      // With the shared policy: two hash tags, two script calls; the shared one refuses, the tenant's is given back.
      ticketOf(await ls[1]!.admit(request(t, { promptTokens: 40, model: 'shared' })));
      const refused = await ls[2]!.admit(request(t, { promptTokens: 20, model: 'shared' }));
      expect(refused).toMatchObject({ admitted: false, code: 'prompt_tokens_per_minute_exceeded' });
      expect(refused.headers['X-AI-RateLimit-Remaining-60-prompt']).toBe('10');
      const tenantKeys = (await Promise.all(c.nodes.map((n) => n.admin.keys('cl:*')))).flat();
      expect(new Set(tenantKeys.map(hashTagOf)).size).toBe(2);
      const after = await ls[3]!.admit(request(t, { promptTokens: 0, maxTokens: 0 }));
      expect(after.headers['X-AI-RateLimit-Remaining-60-prompt']).toBe(String(1000 - 70));
      await Promise.all(ls.map((l) => l.close()));
    } finally {
      await c.stop();
    }
  }, 60_000);
});
