// A Qwen3 router over a private redis-server with N pods' states: bench:overhead's in-process setup.
import { PluginConfigSchema, type PluginConfig } from '../../src/config/plugin-config.js';
import { validateConfig } from '../../src/config/validate.js';
import type { PodState } from '../../src/core/types.js';
import { createKvIndex, type KvIndex } from '../../src/index/index.js';
import { createRouter, type Router, type RouterResources } from '../../src/router/index.js';
import {
  createPromptTokenizer,
  loadChatTemplate,
  loadTokenizer,
  type ChatTemplate,
  type PromptTokenizer,
  type Tokenizer,
} from '../../src/tokenize/index.js';
import { startRedisServer, type RedisServer } from '../../harness/redis-server.js';

export const QWEN_MODEL = 'Qwen/Qwen3-8B';

export interface QwenRouterBench {
  redis: RedisServer;
  config: PluginConfig;
  tokenizer: Tokenizer;
  template: ChatTemplate;
  index: KvIndex;
  resources: RouterResources;
  router: Router;
  /** Writes the pods' states again, as just scraped (the collector does every second). */
  scrapePods(): Promise<void>;
  /** A new, empty segment cache for every router on these resources (a cold decision's tokenizer). */
  resetPromptTokenizer(): void;
  stop(): Promise<void>;
}

/**
 * Starts a redis-server, loads the Qwen3 tokenizer and template from `qwenDir`, writes `pods` fresh pod states
 * (`pod-<p>` at 10.0.0.<p+1>:8000, plus what `podState(p)` adds) and builds a router on them.
 */
export async function startQwenRouter(
  qwenDir: string,
  pods: number,
  podState: (p: number) => Partial<PodState> = () => ({}),
): Promise<QwenRouterBench> {
  const redis = await startRedisServer();
  const config = validateConfig(
    PluginConfigSchema,
    {
      index: 'redis',
      redis_url: redis.url,
      tokenizer: `hf:${qwenDir}tokenizer.json`,
      chat_template: `hf:${qwenDir}tokenizer_config.json`,
      redis_timeout_ms: 1000,
    },
    'bench',
  );
  const tokenizer = loadTokenizer(config.tokenizer);
  const template = loadChatTemplate(config.chat_template);
  const index = createKvIndex({
    kind: 'redis',
    url: redis.url,
    keyPrefix: config.redis_key_prefix,
    lookupTimeoutMs: 1000,
  });
  const newPromptTokenizer = (): PromptTokenizer => createPromptTokenizer(tokenizer, { maxBytes: 64 << 20 });
  let promptTokenizer = newPromptTokenizer();
  const resources: RouterResources = {
    index,
    template: () => template,
    promptTokenizer: () => promptTokenizer,
  };
  const router = createRouter(config, resources);
  const scrapePods = async (): Promise<void> => {
    const now = Date.now();
    for (let p = 0; p < pods; p++)
      await index.upsertPodState(
        { model: QWEN_MODEL, podId: `pod-${p}` },
        { address: `10.0.0.${p + 1}:8000`, lastEventAtMs: now, lastScrapeAtMs: now, ...podState(p) },
      );
  };
  await scrapePods();
  return {
    redis,
    config,
    tokenizer,
    template,
    index,
    resources,
    router,
    scrapePods,
    resetPromptTokenizer: () => (promptTokenizer = newPromptTokenizer()),
    stop: async () => {
      await router.close(); // and the index with it
      await redis.stop();
    },
  };
}
