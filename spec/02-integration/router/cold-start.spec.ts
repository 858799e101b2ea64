import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PluginConfig } from '../../../src/config/plugin-config.js';
import { type KvIndex } from '../../../src/index/index.js';
import {
  closeAllRouters,
  configRouter,
  preloadResources,
  requestKeys,
  resourcesSettled,
} from '../../../src/router/index.js';
import { LOAD_RETRY_MS } from '../../../src/router/resources.js';
import { QWEN3_DIR, qwen3RouterConfig } from '../../helpers/qwen3.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { SEEDED_INDEX_CONFIG } from '../../helpers/seeded-index.js';
import { observerIndex } from '../../helpers/observer-index.js';

const MODEL = 'Qwen/Qwen3-8B';
const body = (user: string): string =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: 'You answer questions about the warehouse inventory. '.repeat(40) },
      { role: 'user', content: user },
    ],
    stream: true,
  });

/** Resolves true once `p` settles: read it right after an await to know whether it had settled by then. */
function settledFlag(p: Promise<unknown>): { readonly done: boolean } {
  const flag = { done: false };
  void p.then(() => (flag.done = true));
  return flag;
}

// The plugin's routers never wait on a tokenizer or template load (issue #33): the first request after an
// instance starts is routed on load alone while the load runs, later ones with cache knowledge, and a
// request on another config is not held up by the load. Ordering is asserted on promises, not on time.
describe('cold start: no request waits on a tokenizer or template load', () => {
  let redis: TestRedis;
  const indexes: KvIndex[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await closeAllRouters();
  });
  afterAll(async () => {
    await Promise.all(indexes.map((i) => i.close()));
    await redis?.stop();
  });

  function config(prefix: string, over: Record<string, unknown> = {}): PluginConfig {
    return qwen3RouterConfig({
      index: 'redis',
      redis_url: redis.url,
      redis_key_prefix: prefix,
      ...SEEDED_INDEX_CONFIG,
      // The subject is the load's ordering: a lookup past the default 25 ms on a loaded host is not.
      redis_timeout_ms: 2000,
      // The event loop's own background loads (decision workers are prepared the same way once loaded, and
      // have their own specs: decision-pool.spec.ts).
      decision_workers: 0,
      ...over,
    });
  }

  async function seedPods(cfg: PluginConfig, pods: string[]): Promise<KvIndex> {
    const index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: cfg.redis_key_prefix });
    indexes.push(index);
    for (const [i, podId] of pods.entries())
      await index.upsertPodState(
        { model: MODEL, podId },
        { address: `10.0.0.${i + 1}:8000`, lastScrapeAtMs: Date.now(), lastEventAtMs: Date.now() },
      );
    return index;
  }

  it('routes the first request on load while the tokenizer loads, then with cache knowledge', async () => {
    const cfg = config('cold-first');
    const index = await seedPods(cfg, ['pod-a', 'pod-b']);

    preloadResources(cfg); // what the plugin does at instance start
    const load = resourcesSettled(cfg);
    const loaded = settledFlag(load);
    const router = configRouter(cfg);

    const first = await router.route(body('What is in aisle 4?'));
    expect(loaded.done).toBe(false);
    expect(first.fallbackReason).toBe('tokenizer_loading');
    expect(first.fallbackDetail).toMatch(/(tokenizer|chat template) "hf:.*" still loading/);
    expect(['pod-a', 'pod-b']).toContain(first.target?.podId); // routed on load, not left to Kong
    router.observe(first, null);

    await load;
    // pod-b holds the prompt's prefix: once loaded, the router sees it.
    const hit = body('What is in aisle 5?');
    const keys = await requestKeys(cfg, hit);
    await index.apply({ model: MODEL, podId: 'pod-b' }, [
      { op: 'store', keys: keys.slice(0, -1), tier: 'GPU' },
    ]);
    const after = await router.route(hit);
    expect(after.fallbackReason).toBeNull();
    expect(after.target?.podId).toBe('pod-b');
    expect(after.decision.chosen?.cachedTokens).toBeGreaterThan(0);
  });

  it('a request on another config completes while this config’s tokenizer is still loading', async () => {
    // The load's synchronous steps (tiktoken's WASM encoder, JSON.parse) still hold the event loop for a
    // while (docs/plugin.md#cold-start): the subject here is ordering, so the lookup may take its time.
    const warm = config('cold-warm', {
      tokenizer: 'tiktoken:cl100k_base',
      chat_template: 'chatml',
      redis_timeout_ms: 10_000,
    });
    await seedPods(warm, ['pod-a']);
    preloadResources(warm);
    await resourcesSettled(warm);
    const warmRouter = configRouter(warm);
    expect((await warmRouter.route(body('connect'))).fallbackReason).toBeNull();

    const cold = config('cold-new', { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml' });
    preloadResources(cold);
    const coldLoad = resourcesSettled(cold);
    const coldLoaded = settledFlag(coldLoad);

    const during: Promise<unknown>[] = [];
    for (let i = 0; i < 5; i++) during.push(warmRouter.route(body(`warm ${i}`)));
    const outcomes = await Promise.all(during);
    expect(coldLoaded.done).toBe(false);
    for (const o of outcomes) expect((o as { fallbackReason: unknown }).fallbackReason).toBeNull();
    await coldLoad;
  });

  it('a failed load is the fallback detail; its retry after LOAD_RETRY_MS does not block a request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kinf-cold-'));
    try {
      const path = join(dir, 'tokenizer.json');
      const cfg = config('cold-retry', { tokenizer: `hf:${path}` });
      await seedPods(cfg, ['pod-a']);
      let now = 1_000_000;
      preloadResources(cfg, () => now); // the loads take this clock for their retry backoff
      await resourcesSettled(cfg);
      const router = configRouter(cfg);

      const failed = await router.route(body('q1'));
      expect(failed.fallbackReason).toBe('tokenizer_error');
      expect(failed.fallbackDetail).toContain(path);
      expect(failed.target?.podId).toBe('pod-a');

      copyFileSync(join(QWEN3_DIR, 'tokenizer.json'), path); // fixed, but not read again until the window ends
      expect((await router.route(body('q2'))).fallbackReason).toBe('tokenizer_error');

      now += LOAD_RETRY_MS;
      const retrying = await router.route(body('q3'));
      const retry = resourcesSettled(cfg);
      const retried = settledFlag(retry);
      expect(retrying.fallbackReason).toBe('tokenizer_loading');
      expect(retrying.fallbackDetail).toMatch(/still loading.*retrying after: .*cannot read/);
      expect(retried.done).toBe(false);
      await retry;
      expect((await router.route(body('q4'))).fallbackReason).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
