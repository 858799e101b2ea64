import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { FAULTS } from '../../bench/lib/faults/faults.js';
import { figures } from '../../bench/lib/faults/measure.js';
import { FaultStack } from '../../bench/lib/faults/stack.js';
import { Traffic } from '../../bench/lib/faults/traffic.js';
import { qwen3TokenizerDir } from '../../bench/lib/setup.js';
import { buildPlugin, type BuiltPlugin } from '../02-integration/plugin/harness.js';
import { waitFor } from '../helpers/ports.js';

/**
 * bench:faults' CI variant (docs/faults.md): the real processes (Redis, emulated pods, collector, the Kong
 * stand-in with the plugin server), an independent client streaming and non-streaming chat through the
 * stand-in, and the cheapest faults for a few seconds each. No request may fail, apart from Kong's own
 * documented 500 before a plugin instance exists; and after Redis comes back empty, the index is refilled with
 * no request sent.
 */

const MODEL = 'qwen3-27b-fp8';
let plugin: BuiltPlugin;
let stack: FaultStack;
let traffic: Traffic;

/** Requests that completed after `fromMs` (traffic clock): the client is still being served. */
async function served(n: number, fromMs: number): Promise<void> {
  await waitFor(
    `${n} requests served`,
    () => traffic.records.filter((r) => r.startMs >= fromMs).length >= n,
    60_000,
  );
}

/** Runs `name` for `holdMs` under the traffic and returns its figures once `after` more requests are served. */
async function underTraffic(name: keyof typeof FAULTS, holdMs: number, after = 6) {
  const baselineFromMs = traffic.now();
  await served(6, baselineFromMs);
  const before = await stack.gatewayStats();
  const injectMs = traffic.now();
  await FAULTS[name].inject(stack);
  // The fault lasts while this many requests are attempted (not a set time: the machine may be slow).
  await new Promise((r) => setTimeout(r, holdMs));
  await FAULTS[name].recover(stack);
  const recoveredMs = traffic.now();
  await served(after, recoveredMs);
  const endMs = traffic.now();
  await traffic.settled(endMs);
  const gw = await stack.gatewayStats();
  return figures(
    name,
    traffic.records,
    { baselineFromMs, injectMs, recoveredMs, endMs },
    {
      kongStartInstance500: gw.startInstanceErrors - before.startInstanceErrors,
      fallbacks: gw.fallbackLines.slice(before.fallbackLines.length),
      qualityRun: 5,
    },
  );
}

beforeAll(async () => {
  plugin = await buildPlugin();
  stack = await FaultStack.start({
    pods: 2,
    timeScale: 20,
    kvCapacityTokens: 8192,
    model: {
      name: MODEL,
      tokenizerSpec: `hf:${join(qwen3TokenizerDir(), 'tokenizer.json')}`,
      templateSpec: 'chatml',
    },
    pluginsDir: plugin.dir,
    childLog: join(process.cwd(), '.tmp', 'faults-spec-children.log'),
  });
  traffic = new Traffic({
    url: stack.gatewayUrl,
    model: MODEL,
    streams: 2,
    groups: 3,
    prefixWords: 200,
    maxTokens: 4,
    seed: 3,
  });
  traffic.start();
  await served(10, 0);
}, 420_000);

afterAll(async () => {
  await traffic?.stop();
  await stack?.stop();
  plugin?.cleanup();
}, 60_000);

describe('faults under sustained traffic (CI variant of bench:faults)', () => {
  it('Redis hangs (SIGSTOP) and resumes: no request fails, and requests keep being served during the hang', async () => {
    const f = await underTraffic('redis-hang', 1500);
    expect(f.failures).toEqual({});
    expect(f.failed).toBe(0);
    // The lookup budget bounds the hang's cost: the gateway went on serving while Redis answered nothing.
    expect(f.during.requests).toBeGreaterThan(0);
  }, 120_000);

  it('the plugin server is killed: nothing fails but Kong’s documented 500 before an instance exists', async () => {
    const f = await underTraffic('plugin-server-kill', 0);
    expect(f.failed).toBeLessThanOrEqual(f.kongStartInstance500);
    expect(Object.keys(f.failures).filter((k) => k !== 'HTTP 500')).toEqual([]);
  }, 120_000);

  it('Redis killed and restarted empty under traffic: no request fails', async () => {
    const f = await underTraffic('redis-restart-empty', 1000);
    expect(f.failures).toEqual({});
    expect(f.failed).toBe(0);
  }, 120_000);

  it('after Redis comes back empty, the collector refills the index with no request sent', async () => {
    await traffic.stop();
    const redis = stack.redisClient();
    try {
      // What the collector wrote: every key but the plugin's shared reservations (those expire).
      const keysNow = async () => (await redis.keys('kinf*')).filter((k) => !/reserv/i.test(k)).sort();
      await waitFor(
        'the index settled',
        async () => {
          const a = await keysNow();
          await new Promise((r) => setTimeout(r, 300));
          return JSON.stringify(a) === JSON.stringify(await keysNow());
        },
        30_000,
      );
      const before = await keysNow();
      expect(before.length).toBeGreaterThan(4);
      const events = (await stack.gatewayStats()).events.access;
      await stack.killRedis();
      await stack.restartRedisEmpty();
      await waitFor(
        'the index refilled',
        async () => {
          const now = new Set(await keysNow().catch(() => []));
          return before.filter((k) => now.has(k)).length >= 0.9 * before.length;
        },
        60_000,
      );
      // No request reached the plugin meanwhile: the refill came from the collector alone.
      expect((await stack.gatewayStats()).events.access).toBe(events);
    } finally {
      redis.disconnect();
    }
  }, 120_000);
});
