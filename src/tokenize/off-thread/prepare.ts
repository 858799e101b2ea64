// A decision's CPU work in a decision worker: parse, chat template, tokenize and block keys of one body.
import { ChainMemo } from '../../core/block-keys.js';
import { loadChatTemplate } from '../load-chat-template.js';
import { loadTokenizer } from '../load-tokenizer.js';
import { createPromptTokenizer, type CachedPromptTokenizer } from '../prompt-tokenizer.js';
import type { SegmentCacheStats } from '../segment-cache.js';
import type { ChatTemplate } from '../types.js';
import { prepareBody, type PreparingThread } from '../prepare-body.js';
import type { PrepareResult, PrepareSettings } from './protocol.js';

/** A failed load is tried again after this long, as on the plugin's thread (router/resource-load.ts). */
const LOAD_RETRY_MS = 30_000;
/** Recent prompts' keys per worker (as router/steps/keys.ts on the plugin's thread): 1M tokens, 16 prompts. */
const recentKeys = new ChainMemo(1 << 20, 16);

type Loaded<T> = { value: T } | { error: unknown; atMs: number };
const templates = new Map<string, Loaded<ChatTemplate>>();
const tokenizers = new Map<string, Loaded<CachedPromptTokenizer>>();

function loaded<T>(cache: Map<string, Loaded<T>>, key: string, load: () => T): T {
  const held = cache.get(key);
  if (held && 'value' in held) return held.value;
  if (held && Date.now() - held.atMs < LOAD_RETRY_MS) throw held.error;
  try {
    const value = load();
    cache.set(key, { value });
    return value;
  } catch (error) {
    cache.set(key, { error, atMs: Date.now() });
    throw error;
  }
}

const templateOf = (s: PrepareSettings): ChatTemplate =>
  loaded(templates, `${s.template}\u0000${JSON.stringify(s.templateKwargs)}`, () =>
    loadChatTemplate(s.template, s.templateKwargs ?? undefined),
  );
const tokenizerOf = (s: PrepareSettings): CachedPromptTokenizer =>
  loaded(tokenizers, s.tokenizer, () =>
    createPromptTokenizer(loadTokenizer(s.tokenizer), { maxBytes: s.segmentCacheBytes }),
  );

/** Loads a config's template and tokenizer here (at instance start, not in a request): rejects on a load error. */
export async function warm(s: PrepareSettings): Promise<void> {
  const template = templateOf(s);
  const tokenizer = tokenizerOf(s);
  // One small request through both, so a worker's first real request does not pay the JIT's first runs.
  const probe = template.render({
    model: 'probe',
    messages: [{ role: 'user', content: 'Warm-up: what is a KV cache?' }],
    addGenerationPrompt: true,
    continueFinalMessage: false,
    stream: false,
  });
  await tokenizer.tokenize(probe, s.maxPromptTokens);
}

/** The segment caches of this worker's tokenizers (hit rates per worker). */
export function segmentStats(): SegmentCacheStats[] {
  return [...tokenizers.values()].flatMap((t) => ('value' in t ? [t.value.stats()] : []));
}

/** This worker's side of a config: its loaded template and tokenizer, its memo of recent keys. */
const workerThread = (s: PrepareSettings): PreparingThread => ({
  template: () => templateOf(s),
  promptTokenizer: () => tokenizerOf(s),
  keys: (tokens, blockSize, seed) => recentKeys.keys(tokens, blockSize, seed),
  failure: (_e, step) => (step === 'template' ? 'template_error' : 'tokenizer_error'),
});

/** The router's prepare step (tokenize/prepare-body.ts) for one body, in this worker. */
export function prepare(s: PrepareSettings, body: Uint8Array | string): Promise<PrepareResult> {
  return prepareBody(s, body, workerThread(s));
}
