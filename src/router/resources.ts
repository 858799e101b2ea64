// Builds a router's resources per plugin config (index, tokenizer, template) and caches routers by config.
import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import {
  PluginConfigSchema,
  defaultTemplateKwargs,
  redisSentinelSettings,
  redisTlsSettings,
  type PluginConfig,
} from '../config/plugin-config.js';
import { createKvIndex, type KvIndex } from '../index/index.js';
import { limiterFor } from './limiter.js';
// Narrow imports, not the tokenize barrel: the plugin bundle carries only what the router uses.
import { loadChatTemplate } from '../tokenize/load-chat-template.js';
import { loadTokenizer, loadTokenizerAsync } from '../tokenize/load-tokenizer.js';
import { createPromptTokenizer, type CachedPromptTokenizer } from '../tokenize/prompt-tokenizer.js';
import type { SegmentCacheStats } from '../tokenize/segment-cache.js';
import type { ChatTemplate, PromptTokenizer, Tokenizer } from '../tokenize/types.js';
import { ResourceLoad } from './resource-load.js';
import { poolPreparer } from './decision-pool.js';
import { sameBodyStats } from './same-body-memo.js';
import {
  FIRST_LOOKUP_BUDGET_MS,
  createRouter,
  type RouteOutcome,
  type Router,
  type RouterResources,
  type RouterStats,
} from './router.js';

/** Segment cache size per tokenizer; shared by every router using that tokenizer spec. */
/** The plugin's segment cache budget per tokenizer (the benchmark's gateway twin uses the same). */
export const SEGMENT_CACHE_BYTES = 64 * 1024 * 1024;

/** Hash of the fields our schema defines (Kong adds route_id, __seq__, … which must not split the cache). */
export function routerCacheKey(config: PluginConfig): string {
  const picked: Record<string, unknown> = {};
  for (const k of Object.keys(PluginConfigSchema.properties).sort())
    picked[k] = (config as Record<string, unknown>)[k];
  return createHash('sha256').update(JSON.stringify(picked)).digest('hex').slice(0, 16);
}

export { LOAD_RETRY_MS, ResourceLoadingError, cachedLoad } from './resource-load.js';

/** One load per tokenizer spec, shared by every router using it (the segment cache lives in it). */
const promptTokenizers = new Map<string, ResourceLoad<PromptTokenizer>>();
/** The loaded ones, for their segment caches' stats. */
const loadedPromptTokenizers = new Map<string, CachedPromptTokenizer>();
/** One load per chat template spec and default kwargs. */
const templates = new Map<string, ResourceLoad<ChatTemplate>>();

export interface ResourceOptions {
  /** For the load-retry backoff (tests). */
  clock?: () => number;
  /**
   * Load the tokenizer and template in the background and never wait for them: until they are loaded a
   * request is routed on load alone (`tokenizer_loading`). The plugin's routers do; without it the first
   * request that needs them loads them on its own stack (tools and specs that route at once).
   */
  background?: boolean;
}

function tokenizerLoad(spec: string, clock: () => number): ResourceLoad<PromptTokenizer> {
  let load = promptTokenizers.get(spec);
  if (!load) {
    const wrap = (t: Tokenizer): PromptTokenizer => {
      const p = createPromptTokenizer(t, { maxBytes: SEGMENT_CACHE_BYTES });
      loadedPromptTokenizers.set(spec, p);
      return p;
    };
    load = new ResourceLoad<PromptTokenizer>(
      {
        what: `tokenizer "${spec}"`,
        loadSync: () => wrap(loadTokenizer(spec)),
        loadAsync: () => loadTokenizerAsync(spec).then(wrap),
      },
      clock,
    );
    promptTokenizers.set(spec, load);
  }
  return load;
}

function templateLoad(config: PluginConfig, clock: () => number): ResourceLoad<ChatTemplate> {
  const kwargs = defaultTemplateKwargs(config.default_chat_template_kwargs);
  const key = `${config.chat_template}\u0000${JSON.stringify(kwargs ?? null)}`;
  let load = templates.get(key);
  if (!load) {
    const loadSync = (): ChatTemplate => loadChatTemplate(config.chat_template, kwargs);
    load = new ResourceLoad<ChatTemplate>(
      {
        what: `chat template "${config.chat_template}"`,
        loadSync,
        // An hf: template is read and compiled synchronously (tens of ms): on its own turn, not in a request.
        loadAsync: () => nextTurn().then(loadSync),
      },
      clock,
    );
    templates.set(key, load);
  }
  return load;
}

/**
 * Starts loading a config's tokenizer and chat template in the background (the plugin calls it at instance
 * start): the config's first request then finds them loaded, or loading, and never waits for them.
 */
export function preloadResources(config: PluginConfig, clock: () => number = Date.now): void {
  tokenizerLoad(config.tokenizer, clock).start();
  templateLoad(config, clock).start();
  void poolPreparer(config, routerCacheKey(config))?.warm();
}

/** Settles when the config's tokenizer and template loads are not running (specs, benchmarks). */
export async function resourcesSettled(config: PluginConfig): Promise<void> {
  await Promise.all([
    tokenizerLoad(config.tokenizer, Date.now).settled(),
    templateLoad(config, Date.now).settled(),
    poolPreparer(config, routerCacheKey(config))?.warm(),
  ]);
}

/**
 * Tokenizer and template load on first use (or in the background, `options.background`), so a bad path
 * becomes a fallback reason (its error in the outcome's fallbackDetail), not a crash; a failed load is
 * retried after LOAD_RETRY_MS. The index is the whole KvIndex the router reads (tests and tools seed it
 * through its writer role).
 */
export function defaultResources(
  config: PluginConfig,
  options: ResourceOptions = {},
): RouterResources & { index: KvIndex } {
  const clock = options.clock ?? Date.now;
  const tokenizer = tokenizerLoad(config.tokenizer, clock);
  const template = templateLoad(config, clock);
  const get = <T>(load: ResourceLoad<T>) => (options.background ? () => load.get() : () => load.getOrLoad());
  // Decision workers serve the plugin's routers (background loads); tools and specs route on their own thread.
  const pooled = options.background ? poolPreparer(config, routerCacheKey(config)) : null;
  void pooled?.warm();
  return {
    index: createKvIndex(
      config.index === 'memory'
        ? { kind: 'memory' }
        : {
            kind: 'redis',
            url: config.redis_url,
            cluster: config.redis_cluster,
            clusterNodes: config.redis_cluster_nodes,
            tls: redisTlsSettings(config),
            sentinel: redisSentinelSettings(config),
            keyPrefix: config.redis_key_prefix,
            // The router enforces redis_timeout_ms itself; the index's own deadline must allow the first
            // lookup, which also connects.
            lookupTimeoutMs: Math.max(config.redis_timeout_ms, FIRST_LOOKUP_BUDGET_MS),
          },
    ),
    template: get(template),
    promptTokenizer: get(tokenizer),
    limiter: limiterFor(config),
    prepare: pooled?.prepare ?? null,
  };
}

/**
 * A config's router is closed, and its Redis connection with it, after this long unused. Kong replaces a
 * plugin instance on every edit of its config and tells the plugin nothing (kong-pdk's CloseInstance does
 * not reach it), so without this each config ever edited kept its router and connection for the life of
 * the plugin server. Longer than a pending decision lives (PendingDecisions' 30 min), so a log phase
 * normally finds the router that routed its request.
 */
export const ROUTER_IDLE_CLOSE_MS = 60 * 60_000;
/** Idle routers are looked for at most this often (on a request). */
const IDLE_SWEEP_MS = 60_000;

interface HeldRouter {
  router: Router;
  lastUsedMs: number;
}

const routers = new Map<string, HeldRouter>();
let nextSweepMs = 0;

/** The router of a config: one per distinct config, made on first use, closed after ROUTER_IDLE_CLOSE_MS idle. */
function routerFor(key: string, config: PluginConfig, nowMs: number): Router {
  let held = routers.get(key);
  if (!held) {
    held = {
      router: createRouter(config, defaultResources(config, { background: true })),
      lastUsedMs: nowMs,
    };
    routers.set(key, held);
  }
  held.lastUsedMs = nowMs;
  if (nowMs >= nextSweepMs) {
    nextSweepMs = nowMs + IDLE_SWEEP_MS;
    for (const [k, h] of routers)
      if (nowMs - h.lastUsedMs >= ROUTER_IDLE_CLOSE_MS) {
        routers.delete(k);
        h.router.close().catch(() => undefined);
      }
  }
  return held.router;
}

/**
 * What a plugin instance holds instead of a router: each call finds the config's live router (a new one
 * if the old was closed for idleness), and an outcome is observed by the router that made it (reservation
 * ids are per router; a closed router's observe only updates its memory). Also what keeps it in use.
 */
export function configRouter(
  config: PluginConfig,
  clock: () => number = Date.now,
): Pick<Router, 'route' | 'observe' | 'waitTurn'> {
  const key = routerCacheKey(config);
  const routedBy = new WeakMap<RouteOutcome, Router>();
  return {
    async route(body, caller, attempt) {
      const router = routerFor(key, config, clock());
      const outcome = await router.route(body, caller, attempt);
      routedBy.set(outcome, router);
      return outcome;
    },
    waitTurn(outcome) {
      return (routedBy.get(outcome) ?? routerFor(key, config, clock())).waitTurn(outcome);
    },
    observe(outcome, actualTtftMs, upstream) {
      const router = routedBy.get(outcome);
      const held = routers.get(key);
      if (router && held?.router === router) held.lastUsedMs = clock();
      (router ?? routerFor(key, config, clock())).observe(outcome, actualTtftMs, upstream);
    },
  };
}

/** Every live router drops what has expired (a timer in the plugin calls this; see Router.sweep). */
export function sweepRouters(nowMs: number = Date.now()): void {
  for (const h of routers.values()) h.router.sweep(nowMs);
}

/** What the process's routers and segment caches hold now, summed (diagnostics, leak specs). */
export function routerStats(): RouterStats & {
  routers: number;
  segmentCaches: SegmentCacheStats[];
  sameBody: ReturnType<typeof sameBodyStats>;
} {
  const sum: RouterStats = { reservations: 0, sharedReservations: 0, flights: 0, sentKeys: 0 };
  for (const h of routers.values()) {
    const s = h.router.stats();
    for (const k of Object.keys(sum) as (keyof RouterStats)[]) sum[k] += s[k];
  }
  return {
    routers: routers.size,
    ...sum,
    segmentCaches: [...loadedPromptTokenizers.values()].map((t) => t.stats()),
    sameBody: sameBodyStats(),
  };
}

/** Routers alive now (tests, diagnostics). */
export function openRouterCount(): number {
  return routers.size;
}

export async function closeAllRouters(): Promise<void> {
  const all = [...routers.values()];
  routers.clear();
  nextSweepMs = 0;
  await Promise.allSettled(all.map((h) => h.router.close()));
}
