/**
 * bench:limits — what token limits cost and how exactly they hold, on a real redis-server (started here).
 *
 *   1. Round trips: the router's index lookup alone, the lookup with the limits' admission in flight beside
 *      it (as route() runs them), and the two one after the other; p50/p95 per request from Node.
 *   2. Redis cost per admission: commands (INFO commandstats) and bytes in and out (INFO stats) per request.
 *   3. Four nodes: four limiters (a connection each) share one Redis and offer one tenant twice its
 *      prompt-token limit for KINF_BENCH_MINUTES (default 2) whole UTC minutes; accepted tokens per minute
 *      against the limit (goal 6c of issue #31: within 2%).
 * Prints a table, writes bench/results/limits.json. Run: npm run bench:limits
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { blockKeys, keySeed } from '../src/core/block-keys.js';
import { RedisKvIndex } from '../src/index/index.js';
import { RedisLimitStore, TokenLimiter, type LimitRequest } from '../src/limits/index.js';
import { PluginConfigSchema } from '../src/config/plugin-config.js';
import { validateConfig } from '../src/config/validate.js';
import { resolveTenant } from '../src/policies/index.js';
import { startRedisServer } from '../harness/redis-server.js';
import { envCount, noOptions } from './lib/cli.js';

noOptions(
  'bench:limits',
  `token limits on a real redis-server (started on a free port): the round trip beside the
index lookup, Redis commands and bytes per admission, and accepted tokens per minute against the limit with four
nodes sharing one Redis. Writes bench/results/limits.json. KINF_BENCH_REQUESTS (default 2000) and
KINF_BENCH_MINUTES (2) size it`,
);

const REQUESTS = envCount('bench:limits', 'KINF_BENCH_REQUESTS', 2000);
const MINUTES = envCount('bench:limits', 'KINF_BENCH_MINUTES', 2);
const MODEL = 'bench/model';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const r3 = (x: number): number => Math.round(x * 1000) / 1000;

async function main(): Promise<void> {
  const server = await startRedisServer();
  const admin = new Redis(server.url);
  try {
    const policies = validateConfig(
      PluginConfigSchema,
      {
        policies: {
          tenant_from: ['header'],
          prices: { [MODEL]: { input_per_million: 1, output_per_million: 4 } },
          tenants: [{ match: { tenant: 'team' }, max_concurrent: 1_000_000, daily_budget: 1e9 }],
          rate_limits: [
            {
              match: {},
              limits: [
                { tokens: 'prompt', window: 'minute', limit: 1e15 },
                { tokens: 'total', window: 'day', limit: 1e15 },
              ],
            },
          ],
        },
      },
      'bench',
    ).policies!;
    const tenant = resolveTenant(
      policies,
      { consumer: null, consumerGroups: [], headerTenant: 'team' },
      null,
    );
    const index = new RedisKvIndex({ url: server.url, keyPrefix: 'kinf', lookupTimeoutMs: 2000 });
    const store = new RedisLimitStore({ url: server.url });
    const limiter = new TokenLimiter({ policies, store, keyPrefix: 'kinf', timeoutMs: 1000 });
    // A 2,000-token prompt: 125 blocks to look up (an empty index: the script's round trip, not its search).
    const tokens = Array.from({ length: 2000 }, (_, i) => (i * 7919) % 50_000);
    const keys = blockKeys(tokens, 16, keySeed({ model: MODEL }));
    const req: LimitRequest = {
      tenant,
      model: MODEL,
      promptTokens: 2000,
      maxTokens: 256,
      estimatedCost: 0.003,
    };
    await index.lookup(MODEL, keys);
    await limiter.admit(req);

    const modes = {
      lookup: async () => void (await index.lookup(MODEL, keys)),
      'lookup ‖ admit': async () => void (await Promise.all([index.lookup(MODEL, keys), limiter.admit(req)])),
      'lookup → admit': async () => {
        await index.lookup(MODEL, keys);
        await limiter.admit(req);
      },
    };
    const times: Record<string, number[]> = Object.fromEntries(Object.keys(modes).map((m) => [m, []]));
    // Interleaved, so the three see the same machine.
    for (let i = 0; i < REQUESTS; i++)
      for (const [m, run] of Object.entries(modes)) {
        const t0 = performance.now();
        await run();
        times[m]!.push(performance.now() - t0);
      }
    const latency = Object.fromEntries(
      Object.entries(times).map(([m, xs]) => [m, { p50Ms: r3(pct(xs, 50)), p95Ms: r3(pct(xs, 95)) }]),
    );

    // Redis cost of one admission (counters: prompt/minute, total/day, budget; and the slot), then its settle.
    await admin.config('RESETSTAT');
    const before = await admin.info('stats');
    const n = 1000;
    for (let i = 0; i < n; i++) {
      const v = await limiter.admit(req);
      if (v.admitted && v.ticket) await limiter.settle(v.ticket, { outputTokens: 100, cost: 0.002 });
    }
    const after = await admin.info('stats');
    const stat = (s: string, k: string): number => Number(new RegExp(`${k}:(\\d+)`).exec(s)![1]);
    const cmd = await admin.info('commandstats');
    const calls = [...cmd.matchAll(/cmdstat_(\w+):calls=(\d+)/g)]
      .filter(([, c]) => c !== 'config' && c !== 'info')
      .map(([, c, k]) => [c, Number(k) / n] as const);
    const evalsha = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(cmd);
    const cost = {
      redisServerUsecPerRequest: evalsha ? r3(Number(evalsha[2]) / n) : null,
      commandsPerRequest: Object.fromEntries(calls),
      bytesInPerRequest: Math.round(
        (stat(after, 'total_net_input_bytes') - stat(before, 'total_net_input_bytes')) / n,
      ),
      bytesOutPerRequest: Math.round(
        (stat(after, 'total_net_output_bytes') - stat(before, 'total_net_output_bytes')) / n,
      ),
      keysPerTenant: (await admin.keys('kinf:{l:*')).length,
    };
    await Promise.all([limiter.close(), index.close()]);

    // Four nodes, one tenant offered twice its limit, for whole UTC minutes.
    const LIMIT = 60_000;
    const fourPolicies = validateConfig(
      PluginConfigSchema,
      {
        policies: {
          tenant_from: ['header'],
          rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'minute', limit: LIMIT }] }],
        },
      },
      'bench',
    ).policies!;
    const nodes = Array.from(
      { length: 4 },
      () =>
        new TokenLimiter({
          policies: fourPolicies,
          store: new RedisLimitStore({ url: server.url }),
          keyPrefix: 'four',
          timeoutMs: 1000,
        }),
    );
    const t4 = resolveTenant(
      fourPolicies,
      { consumer: null, consumerGroups: [], headerTenant: 'limited' },
      null,
    );
    const accepted = new Map<number, number>();
    const offered = new Map<number, number>();
    // Start at the next minute; offer 2× the limit per minute: each node sends a 100–1900 token prompt (1000 on
    // average) every 2 s on average (30 a minute each, 120 in all: 120,000 tokens against 60,000).
    const start = Math.ceil(Date.now() / 60_000) * 60_000;
    const end = start + MINUTES * 60_000;
    await new Promise((r) => setTimeout(r, start - Date.now()));
    let seed = 7;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    await Promise.all(
      nodes.map(async (l) => {
        while (Date.now() < end) {
          const size = 100 + Math.floor(rand() * 1800);
          const minute = Math.floor(Date.now() / 60_000);
          offered.set(minute, (offered.get(minute) ?? 0) + size);
          const v = await l.admit({
            tenant: t4,
            model: MODEL,
            promptTokens: size,
            maxTokens: 0,
            estimatedCost: null,
          });
          if (v.admitted) accepted.set(minute, (accepted.get(minute) ?? 0) + size);
          await new Promise((r) => setTimeout(r, 1000 + rand() * 2000));
        }
      }),
    );
    await Promise.all(nodes.map((l) => l.close()));
    const perMinute = [...accepted.entries()]
      .filter(([m]) => m * 60_000 >= start && (m + 1) * 60_000 <= end)
      .map(([m, a]) => ({
        minute: new Date(m * 60_000).toISOString(),
        offered: offered.get(m) ?? 0,
        accepted: a,
        ofLimit: r3(a / LIMIT),
      }));

    const result = {
      command: `KINF_BENCH_REQUESTS=${REQUESTS} KINF_BENCH_MINUTES=${MINUTES} npm run bench:limits`,
      at: new Date().toISOString(),
      machine: { cpus: cpus().length, loadavg: loadavg().map(r3) },
      requests: REQUESTS,
      latency,
      redisCostPerAdmitAndSettle: cost,
      fourNodes: { limit: LIMIT, window: 'minute', perMinute },
    };
    console.log('round trip per request (ms):');
    for (const [m, l] of Object.entries(latency))
      console.log(`  ${m.padEnd(16)} p50 ${l.p50Ms}  p95 ${l.p95Ms}`);
    console.log('Redis per admission + settle:', JSON.stringify(cost));
    console.log(`four nodes, limit ${LIMIT} prompt tokens/minute:`);
    for (const p of perMinute)
      console.log(
        `  ${p.minute} offered ${p.offered} accepted ${p.accepted} (${(p.ofLimit * 100).toFixed(2)}% of the limit)`,
      );
    mkdirSync('bench/results', { recursive: true });
    writeFileSync('bench/results/limits.json', JSON.stringify(result, null, 2) + '\n');
  } finally {
    admin.disconnect();
    await server.stop();
  }
}

await main();
