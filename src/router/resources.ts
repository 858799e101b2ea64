import { createHash } from 'node:crypto';
import { PluginConfigSchema, type PluginConfig } from '../config/plugin-config.js';
import { createKvIndex } from '../index/create.js';
// Narrow imports: the tokenize barrel also exports verify-tokenizer (YAML, fleet config), which the plugin
// bundle must not carry.
import { loadChatTemplate } from '../tokenize/load-chat-template.js';
import { loadTokenizer } from '../tokenize/load-tokenizer.js';
import { createPromptTokenizer } from '../tokenize/prompt-tokenizer.js';
import type { ChatTemplate, PromptTokenizer } from '../tokenize/types.js';
import { FIRST_LOOKUP_BUDGET_MS, createRouter, type Router, type RouterResources } from './router.js';

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

/** A failed tokenizer or template load is tried again only after this long (a fixed file needs no restart). */
export const LOAD_RETRY_MS = 30_000;

/**
 * `load` once; its value is kept for good, its failure for LOAD_RETRY_MS, during which the same error is
 * thrown again at no cost (a bad 4 MB tokenizer.json was re-read on every request, 5–7 ms each).
 */
export function cachedLoad<T>(load: () => T, clock: () => number = Date.now): () => T {
  let value: { v: T } | null = null;
  let failed: { error: unknown; atMs: number } | null = null;
  return () => {
    if (value) return value.v;
    if (failed && clock() - failed.atMs < LOAD_RETRY_MS) throw failed.error;
    try {
      value = { v: load() };
      failed = null;
      return value.v;
    } catch (e) {
      failed = { error: e, atMs: clock() };
      throw e;
    }
  };
}

/** One loader per tokenizer spec, shared by every router using it (the segment cache lives in it). */
const promptTokenizers = new Map<string, () => PromptTokenizer>();

export interface ResourceOptions {
  /** For the load-retry backoff (tests). */
  clock?: () => number;
}

/**
 * Tokenizer and template load lazily, on first use, so a bad path becomes a fallback reason (its error in
 * the outcome's fallbackDetail), not a crash; a failed load is retried after LOAD_RETRY_MS.
 */
export function defaultResources(config: PluginConfig, options: ResourceOptions = {}): RouterResources {
  const clock = options.clock ?? Date.now;
  const spec = config.tokenizer;
  let tokenizer = promptTokenizers.get(spec);
  if (!tokenizer) {
    tokenizer = cachedLoad(
      () => createPromptTokenizer(loadTokenizer(spec), { maxBytes: SEGMENT_CACHE_BYTES }),
      clock,
    );
    promptTokenizers.set(spec, tokenizer);
  }
  return {
    index: createKvIndex(
      config.index === 'memory'
        ? { kind: 'memory' }
        : {
            kind: 'redis',
            url: config.redis_url,
            cluster: config.redis_cluster,
            clusterNodes: config.redis_cluster_nodes,
            keyPrefix: config.redis_key_prefix,
            // The router enforces redis_timeout_ms itself; the index's own deadline must allow the first
            // lookup, which also connects.
            lookupTimeoutMs: Math.max(config.redis_timeout_ms, FIRST_LOOKUP_BUDGET_MS),
          },
    ),
    template: cachedLoad((): ChatTemplate => loadChatTemplate(config.chat_template), clock),
    promptTokenizer: tokenizer,
  };
}

const routers = new Map<string, Router>();

/** One router per distinct config, for the life of the process (Kong gives plugins no close hook). */
export function getRouter(config: PluginConfig): Router {
  const key = routerCacheKey(config);
  let r = routers.get(key);
  if (!r) {
    r = createRouter(config, defaultResources(config));
    routers.set(key, r);
  }
  return r;
}

export async function closeAllRouters(): Promise<void> {
  const all = [...routers.values()];
  routers.clear();
  await Promise.allSettled(all.map((r) => r.close()));
}
