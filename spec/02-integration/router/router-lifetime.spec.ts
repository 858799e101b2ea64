import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import {
  closeAllRouters,
  configRouter,
  defaultResources,
  preloadResources,
  resourcesSettled,
} from '../../../src/router/index.js';
import { ROUTER_IDLE_CLOSE_MS, openRouterCount } from '../../../src/router/resources.js';
import { qwen3RouterConfig } from '../../helpers/qwen3.js';
import { waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { SEEDED_INDEX_CONFIG } from '../../helpers/seeded-index.js';

const MODEL = 'Qwen/Qwen3-8B';
const body = (user: string): string =>
  JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: user }], stream: true });

// Kong replaces a plugin instance on every edit of its config and never tells the plugin: the router of
// the config before the edit (and its Redis connection) must not live as long as the plugin server.
describe('a config’s router is closed, with its Redis connection, after ROUTER_IDLE_CLOSE_MS unused', () => {
  let redis: TestRedis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterEach(async () => {
    await closeAllRouters();
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

  async function connections(): Promise<number> {
    const list = (await admin.client('LIST')) as string;
    return list.split('\n').filter((l) => l.includes('addr=')).length;
  }

  function config(prefix: string): PluginConfig {
    // The routers' own clock is the wall clock (the injected one drives the idle sweep only): the pod seeded
    // below must stay fresh for however long this takes on a loaded machine.
    return qwen3RouterConfig({
      index: 'redis',
      redis_url: redis.url,
      redis_key_prefix: prefix,
      ...SEEDED_INDEX_CONFIG,
    });
  }

  it('closes the idle one only, routes its next request on a new one, and observes late on the old', async () => {
    const [cfgA, cfgB] = [config('life-a'), config('life-b')];
    const before = await connections();
    const routerConnections = async (): Promise<number> => (await connections()) - before;
    const setup = defaultResources(cfgA).index;
    await setup.upsertPodState(
      { model: MODEL, podId: 'pod-a' },
      { address: '10.0.0.1:8000', lastScrapeAtMs: Date.now(), lastEventAtMs: Date.now() },
    );
    await setup.close();
    await waitFor('the setup connection closed', async () => (await routerConnections()) === 0);

    const t0 = 5_000_000;
    let now = t0;
    // The plugin's routers never wait on the tokenizer: load it first, as an instance start does.
    preloadResources(cfgA);
    await resourcesSettled(cfgA);
    const [a, b] = [configRouter(cfgA, () => now), configRouter(cfgB, () => now)];
    const first = await a.route(body('first'));
    expect(first.fallbackReason).toBeNull();
    expect(first.target?.podId).toBe('pod-a');
    expect((await b.route(body('b'))).fallbackReason).toBe('no_pods_in_index');
    expect(openRouterCount()).toBe(2);
    await waitFor('both routers connected', async () => (await routerConnections()) === 2);

    // Idle for less than the limit: kept (this request sweeps).
    now = t0 + ROUTER_IDLE_CLOSE_MS - 60_000;
    await b.route(body('b'));
    expect(openRouterCount()).toBe(2);

    // A reaches the limit: closed, its connection with it; B, in use, stays.
    now = t0 + ROUTER_IDLE_CLOSE_MS;
    await b.route(body('b'));
    expect(openRouterCount()).toBe(1);
    await waitFor('the idle router’s connection closed', async () => (await routerConnections()) === 1);

    // A decision of the closed router is observed by it (its reservation ids are its own), not a new one.
    a.observe(first, null);
    expect(openRouterCount()).toBe(1);

    // The instance still holding A routes on a new router, on the index (a closed one would fail open).
    const again = await a.route(body('again'));
    expect(again.fallbackReason).toBeNull();
    expect(again.target?.podId).toBe('pod-a');
    expect(openRouterCount()).toBe(2);
    await waitFor('the new router connected', async () => (await routerConnections()) === 2);
  }, 90_000); // loads the Qwen3 tokenizer (in the decision workers too): ~30 s on a loaded host

  it('a request observed keeps its router in use', async () => {
    const cfg = config('life-c');
    const t0 = 9_000_000;
    let now = t0;
    const c = configRouter(cfg, () => now);
    const other = configRouter(config('life-d'), () => now);
    const out = await c.route(body('long stream'));
    // Its log phase comes near the limit (a long response): that counts as use.
    now = t0 + ROUTER_IDLE_CLOSE_MS - 1;
    c.observe(out, null);
    now = t0 + ROUTER_IDLE_CLOSE_MS + 60_000;
    await other.route(body('sweep'));
    expect(openRouterCount()).toBe(2);
  });
});
