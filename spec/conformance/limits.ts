// One spec suite for every LimitStore: the memory store must mean what the Redis scripts mean.
import { afterEach, describe, expect, it } from 'vitest';
import { PluginConfigSchema } from '../../src/config/plugin-config.js';
import { validateConfig } from '../../src/config/validate.js';
import {
  SLOT_TTL_MS,
  TokenLimiter,
  type LimitRequest,
  type LimitStore,
  type LimitVerdict,
} from '../../src/limits/index.js';
import { resolveTenant, type Policies, type Tenant } from '../../src/policies/index.js';

export const policiesOf = (p: unknown): Policies =>
  validateConfig(PluginConfigSchema, { policies: p }, 'c').policies!;

export function tenantOf(policies: Policies, name: string, consumerGroups: string[] = []): Tenant {
  return resolveTenant(policies, { consumer: null, consumerGroups, headerTenant: name }, null);
}

export function request(tenant: Tenant, over: Partial<LimitRequest> = {}): LimitRequest {
  return { tenant, model: 'm', promptTokens: 10, maxTokens: 0, estimatedCost: null, ...over };
}

export function ticketOf(v: LimitVerdict) {
  if (!v.admitted || !v.ticket) throw new Error(`not admitted with a ticket: ${JSON.stringify(v)}`);
  return v.ticket;
}

/** A store per test; `prefix` keeps the Redis stores of one server apart. */
export type StoreFactory = () => Promise<{ store: LimitStore; close(): Promise<void> }>;

/** 2026-03-04T10:20:30Z: a clock inside a minute, an hour and a day, so rollovers are near and known. */
const T0 = Date.UTC(2026, 2, 4, 10, 20, 30);

export function describeLimitStoreConformance(name: string, factory: StoreFactory): void {
  describe(`${name}: token limits, caps and budgets`, () => {
    const open: { close(): Promise<void> }[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((o) => o.close()));
    });

    let n = 0;
    async function limiter(p: unknown, clock: { now: number }) {
      const s = await factory();
      open.push(s);
      return new TokenLimiter({
        policies: policiesOf({ tenant_from: ['header'], ...(p as object) }),
        store: s.store,
        keyPrefix: `t${process.pid}x${++n}`,
        timeoutMs: 2000,
        clock: () => clock.now,
      });
    }

    it('a prompt limit holds exactly: a request that fits to the token is admitted, one token more is not', async () => {
      const clock = { now: T0 };
      const l = await limiter(
        { rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'minute', limit: 100 }] }] },
        clock,
      );
      const t = tenantOf(l.policies, 'a');
      expect((await l.admit(request(t, { promptTokens: 60 }))).admitted).toBe(true);
      const over = await l.admit(request(t, { promptTokens: 41 }));
      expect(over).toMatchObject({
        admitted: false,
        status: 429,
        code: 'prompt_tokens_per_minute_exceeded',
        retryAfterS: 30,
      });
      expect(over.headers).toMatchObject({
        'X-AI-RateLimit-Limit-60-prompt': '100',
        'X-AI-RateLimit-Remaining-60-prompt': '40',
        'X-AI-RateLimit-Reset-60-prompt': '30',
        'X-AI-RateLimit-Retry-After': '30',
      });
      const exact = await l.admit(request(t, { promptTokens: 40 }));
      expect(exact).toMatchObject({ admitted: true, headers: { 'X-AI-RateLimit-Remaining-60-prompt': '0' } });
      expect((await l.admit(request(t, { promptTokens: 1 }))).admitted).toBe(false);
      // Another tenant has its own counters (per: tenant).
      expect((await l.admit(request(tenantOf(l.policies, 'b'), { promptTokens: 100 }))).admitted).toBe(true);
    });

    it('a request larger than the limit itself says it can never fit', async () => {
      const l = await limiter(
        { rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'hour', limit: 5 }] }] },
        { now: T0 },
      );
      const v = await l.admit(request(tenantOf(l.policies, 'a'), { promptTokens: 6 }));
      expect(v.admitted).toBe(false);
      if (!v.admitted) expect(v.message).toMatch(/needs 6 prompt tokens, more than the limit of 5 per hour/);
    });

    it('windows roll over: a full minute opens again at the next UTC minute, the hour and day keep counting', async () => {
      const clock = { now: T0 };
      const l = await limiter(
        {
          rate_limits: [
            {
              match: {},
              limits: [
                { tokens: 'prompt', window: 'minute', limit: 10 },
                { tokens: 'prompt', window: 'hour', limit: 25 },
                { tokens: 'prompt', window: 'day', limit: 1000 },
              ],
            },
          ],
        },
        clock,
      );
      const t = tenantOf(l.policies, 'a');
      expect((await l.admit(request(t, { promptTokens: 10 }))).admitted).toBe(true);
      expect((await l.admit(request(t, { promptTokens: 1 }))).admitted).toBe(false);
      clock.now = T0 + 29_999; // 10:20:59.999
      expect((await l.admit(request(t, { promptTokens: 1 }))).admitted).toBe(false);
      clock.now = T0 + 30_000; // 10:21:00
      const next = await l.admit(request(t, { promptTokens: 10 }));
      expect(next).toMatchObject({
        admitted: true,
        headers: {
          'X-AI-RateLimit-Remaining-60-prompt': '0',
          'X-AI-RateLimit-Remaining-3600-prompt': '5',
          'X-AI-RateLimit-Remaining-86400-prompt': '980',
          'X-AI-RateLimit-Reset-3600-prompt': String(39 * 60),
        },
      });
      clock.now = T0 + 90_000; // 10:22:00: the minute is free, the hour has 5 left
      const hour = await l.admit(request(t, { promptTokens: 6 }));
      expect(hour).toMatchObject({
        admitted: false,
        code: 'prompt_tokens_per_hour_exceeded',
        retryAfterS: 38 * 60,
      });
      clock.now = Date.UTC(2026, 2, 4, 11, 0, 0);
      expect((await l.admit(request(t, { promptTokens: 10 }))).admitted).toBe(true);
    });

    it('output tokens are reserved from max_tokens (or the default) and settled to the actual count', async () => {
      const clock = { now: T0 };
      const l = await limiter(
        {
          default_output_tokens: 50,
          rate_limits: [
            {
              match: {},
              limits: [
                { tokens: 'output', window: 'minute', limit: 200 },
                { tokens: 'total', window: 'minute', limit: 1000 },
                { tokens: 'prompt', window: 'minute', limit: 1000 },
              ],
            },
          ],
        },
        clock,
      );
      const t = tenantOf(l.policies, 'a');
      const a = await l.admit(request(t, { promptTokens: 10, maxTokens: 150 }));
      expect(a.headers).toMatchObject({
        'X-AI-RateLimit-Remaining-60-output': '50',
        'X-AI-RateLimit-Remaining-60-total': '840',
      });
      const b = await l.admit(request(t, { promptTokens: 10, maxTokens: null })); // the default: 50
      expect(b.headers).toMatchObject({ 'X-AI-RateLimit-Remaining-60-output': '0' });
      expect((await l.admit(request(t, { promptTokens: 1, maxTokens: 1 }))).admitted).toBe(false);
      // a answered 30 of its 150: 120 come back to output and total; prompt stays as counted.
      expect(await l.settle(ticketOf(a), { outputTokens: 30, cost: null })).toBeNull();
      expect(await l.settle(ticketOf(a), { outputTokens: 0, cost: null })).toBeNull(); // twice: nothing more
      const c = await l.admit(request(t, { promptTokens: 5, maxTokens: 20 }));
      expect(c.headers).toMatchObject({
        'X-AI-RateLimit-Remaining-60-output': '100',
        'X-AI-RateLimit-Remaining-60-total': String(1000 - (10 + 30) - (10 + 50) - (5 + 20)),
        'X-AI-RateLimit-Remaining-60-prompt': String(1000 - 25),
      });
      // b ran over its reservation (no max_tokens: the default is a guess): the overshoot is counted.
      await l.settle(ticketOf(b), { outputTokens: 80, cost: null });
      // An unknown actual keeps the reservation as counted; release gives everything back, prompt too.
      await l.settle(ticketOf(c), { outputTokens: null, cost: null });
      const d = await l.admit(request(t, { promptTokens: 7, maxTokens: 10 }));
      expect(d.headers).toMatchObject({
        'X-AI-RateLimit-Remaining-60-output': String(200 - 30 - 80 - 20 - 10),
      });
      await l.release(ticketOf(d));
      const e = await l.admit(request(t, { promptTokens: 0, maxTokens: 0 }));
      expect(e.headers).toMatchObject({
        'X-AI-RateLimit-Remaining-60-output': String(200 - 30 - 80 - 20),
        'X-AI-RateLimit-Remaining-60-prompt': String(1000 - 25),
      });
    });

    it('a concurrency cap counts requests in flight over every node; release or expiry frees a slot', async () => {
      const clock = { now: T0 };
      const l = await limiter({ tenants: [{ match: { tenant: 'a' }, max_concurrent: 2 }] }, clock);
      const t = tenantOf(l.policies, 'a');
      const one = ticketOf(await l.admit(request(t)));
      ticketOf(await l.admit(request(t)));
      const third = await l.admit(request(t));
      expect(third).toMatchObject({ admitted: false, code: 'concurrency_cap_exceeded', retryAfterS: 1 });
      await l.release(one);
      const again = ticketOf(await l.admit(request(t)));
      expect(again.slot).not.toBeNull();
      // A node that died never releases: its slots free themselves after SLOT_TTL_MS.
      clock.now = T0 + SLOT_TTL_MS + 1;
      ticketOf(await l.admit(request(t)));
      ticketOf(await l.admit(request(t)));
      expect((await l.admit(request(t))).admitted).toBe(false);
      // A tenant without a cap is not counted at all.
      expect(await l.admit(request(tenantOf(l.policies, 'b')))).toMatchObject({
        admitted: true,
        ticket: null,
      });
    });

    it('a daily budget counts estimated cost at admission, settles to the actual, and opens at UTC midnight', async () => {
      const clock = { now: T0 };
      const l = await limiter(
        {
          prices: { m: { input_per_million: 1 } },
          tenants: [{ match: { tenant: 'a' }, daily_budget: 1 }],
        },
        clock,
      );
      const t = tenantOf(l.policies, 'a');
      const a = ticketOf(await l.admit(request(t, { estimatedCost: 0.4 })));
      ticketOf(await l.admit(request(t, { estimatedCost: 0.4 })));
      const over = await l.admit(request(t, { estimatedCost: 0.3 }));
      expect(over).toMatchObject({ admitted: false, code: 'daily_budget_exceeded' });
      if (!over.admitted) {
        expect(over.message).toMatch(/budget is 1, 0\.8 is spent/);
        expect(over.retryAfterS).toBe(13 * 3600 + 39 * 60 + 30);
      }
      await l.settle(a, { outputTokens: null, cost: 0.1 });
      ticketOf(await l.admit(request(t, { estimatedCost: 0.5 })));
      // Unknown cost (no price): not counted, not refused.
      expect((await l.admit(request(t, { estimatedCost: null }))).admitted).toBe(true);
      clock.now = Date.UTC(2026, 2, 5, 0, 0, 0);
      ticketOf(await l.admit(request(t, { estimatedCost: 1 })));
    });

    it('per: all shares one counter between tenants; a model match counts only that model', async () => {
      const l = await limiter(
        {
          rate_limits: [
            { match: {}, per: 'all', limits: [{ tokens: 'prompt', window: 'minute', limit: 30 }] },
            { match: { model: 'big' }, limits: [{ tokens: 'prompt', window: 'minute', limit: 5 }] },
          ],
        },
        { now: T0 },
      );
      const [a, b] = [tenantOf(l.policies, 'a'), tenantOf(l.policies, 'b')];
      expect((await l.admit(request(a, { promptTokens: 20 }))).admitted).toBe(true);
      expect((await l.admit(request(b, { promptTokens: 11 }))).admitted).toBe(false);
      expect((await l.admit(request(b, { promptTokens: 6, model: 'big' }))).admitted).toBe(false);
      expect((await l.admit(request(b, { promptTokens: 5, model: 'big' }))).admitted).toBe(true);
      // The refused "big" request was counted nowhere: the shared counter has 30 − 25 left.
      expect((await l.admit(request(a, { promptTokens: 5 }))).admitted).toBe(true);
      expect((await l.admit(request(a, { promptTokens: 1 }))).admitted).toBe(false);
    });

    it('a consumer-group match limits the group’s members, each with its own counters', async () => {
      const l = await limiter(
        {
          rate_limits: [
            { match: { consumer_group: 'free' }, limits: [{ tokens: 'total', window: 'day', limit: 100 }] },
          ],
        },
        { now: T0 },
      );
      const free = tenantOf(l.policies, 'a', ['free']);
      expect((await l.admit(request(free, { promptTokens: 90, maxTokens: 10 }))).admitted).toBe(true);
      expect((await l.admit(request(free, { promptTokens: 1, maxTokens: 0 }))).admitted).toBe(false);
      expect(await l.admit(request(tenantOf(l.policies, 'a'), { promptTokens: 500 }))).toMatchObject({
        admitted: true,
        ticket: null,
        headers: {},
      });
    });
  });
}
