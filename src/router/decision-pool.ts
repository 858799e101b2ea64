// The plugin server's decision workers: one pool per process (decision_workers) and a config's use of it.
import { availableParallelism } from 'node:os';
import { defaultTemplateKwargs, type PluginConfig } from '../config/plugin-config.js';
import { DecisionPool, type PoolFailure } from '../tokenize/off-thread/pool.js';
import { SameBodyMemo } from './same-body-memo.js';
import type { PrepareResult, PrepareSettings } from '../tokenize/off-thread/protocol.js';

/** The whole segment cache budget of the process, split among the workers (each sees its share of prefixes). */
const POOL_SEGMENT_CACHE_BYTES = 64 * 1024 * 1024;
const MIN_WORKER_SEGMENT_CACHE_BYTES = 16 * 1024 * 1024;

let pool: DecisionPool | null = null;
/** The pool could not start: every config prepares on the event loop (the default stays safe). */
let poolFailed: string | null = null;

/** Workers a config asks for: decision_workers, else the cores available. */
export function workersWanted(config: Pick<PluginConfig, 'decision_workers'>): number {
  return config.decision_workers ?? availableParallelism();
}

/**
 * The process's pool, started by the first config that wants workers (its decision_workers sizes it); null
 * when the config wants none, or the workers failed to start (then every request is prepared inline).
 */
export function decisionPoolFor(config: Pick<PluginConfig, 'decision_workers'>): DecisionPool | null {
  const n = workersWanted(config);
  if (n === 0 || poolFailed !== null) return null;
  if (!pool)
    try {
      pool = new DecisionPool(n);
    } catch (e) {
      poolFailed = e instanceof Error ? e.message : String(e);
      return null;
    }
  return pool;
}

/** The running pool, if any (diagnostics, benchmarks, the debug hook). */
export function runningDecisionPool(): DecisionPool | null {
  return pool;
}

/** Stops the pool (specs; closeAllRouters): the next config that wants workers starts a new one. */
export async function closeDecisionPool(): Promise<void> {
  const p = pool;
  pool = null;
  poolFailed = null;
  await p?.close();
}

/** What a worker needs of the config to prepare its requests. */
export function prepareSettings(config: PluginConfig, workers: number): PrepareSettings {
  return {
    tokenizer: config.tokenizer,
    template: config.chat_template,
    templateKwargs: defaultTemplateKwargs(config.default_chat_template_kwargs) ?? null,
    maxBodyBytes: config.max_body_bytes,
    loraAdapters: config.lora_adapters ?? null,
    maxMessages: config.max_template_messages,
    maxDepth: config.max_template_depth,
    maxPromptTokens: config.max_prompt_tokens,
    maxModelLen: config.max_model_len ?? null,
    blockSize: config.block_size,
    budgetMs: config.decision_budget_ms,
    segmentCacheBytes: Math.max(
      MIN_WORKER_SEGMENT_CACHE_BYTES,
      Math.floor(POOL_SEGMENT_CACHE_BYTES / Math.max(1, workers)),
    ),
  };
}

const QUOTE = 0x22;
const MODEL_KEY = Buffer.from('"model"');
const MESSAGES_KEY = Buffer.from('"messages"');
/** Bytes of the first messages hashed for affinity: a system prompt's start, or the first turn's. */
const AFFINITY_BYTES = 512;

function fnv1a(h: number, b: Uint8Array, from: number, to: number): number {
  for (let i = from; i < to; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  return h;
}

/**
 * A request's worker affinity: a hash of its model's bytes and the first AFFINITY_BYTES after "messages", so
 * requests sharing a model and a conversation start (a system prompt, an agent's context) meet the same
 * worker's segment cache. Two indexOf over the body, no parse: bodies whose keys come in another order
 * still hash alike.
 */
export function affinityOf(body: Uint8Array | string): number {
  const b = typeof body === 'string' ? Buffer.from(body.slice(0, 1 << 16)) : body;
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  let h = 0x811c9dc5;
  const m = buf.indexOf(MODEL_KEY);
  if (m >= 0) h = fnv1a(h, buf, m, Math.min(buf.length, m + 80));
  const at = buf.indexOf(MESSAGES_KEY);
  if (at >= 0) h = fnv1a(h, buf, at, Math.min(buf.length, at + AFFINITY_BYTES));
  return h >>> 0;
}

/** Bytes scanned for the model when the worker gave no answer. */
const MODEL_SCAN_BYTES = 1 << 16;

/**
 * The top-level `model` of a body, from its first 64 KiB without parsing it (strings and depth tracked): what
 * a request whose worker failed or ran out of time needs to be routed on load among its model's pods. Null
 * when not found there (Kong's target is kept).
 */
export function modelOf(body: Uint8Array | string): string | null {
  const b = typeof body === 'string' ? Buffer.from(body.slice(0, MODEL_SCAN_BYTES)) : body;
  const end = Math.min(b.length, MODEL_SCAN_BYTES);
  let depth = 0;
  for (let i = 0; i < end; i++) {
    const c = b[i]!;
    if (c === QUOTE) {
      let j = i + 1;
      while (j < end && b[j] !== QUOTE) j += b[j] === 0x5c ? 2 : 1;
      if (depth === 1 && j - i === 6 && Buffer.from(b.buffer, b.byteOffset + i, 7).equals(MODEL_KEY)) {
        let k = j + 1;
        while (k < end && (b[k] === 0x20 || b[k] === 0x3a || b[k] === 0x0a || b[k] === 0x09 || b[k] === 0x0d))
          k++;
        if (b[k] !== QUOTE) return null;
        let e = k + 1;
        while (e < end && b[e] !== QUOTE) e += b[e] === 0x5c ? 2 : 1;
        if (e >= end) return null;
        try {
          const v: unknown = JSON.parse(Buffer.from(b.buffer, b.byteOffset + k, e - k + 1).toString('utf8'));
          return typeof v === 'string' && v.length > 0 ? v : null;
        } catch {
          return null;
        }
      }
      i = j;
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  return null;
}

export type PoolPrepared = PrepareResult | PoolFailure;

/** The pool's entry as the router calls it, given the context windows to cut at; null while no worker can. */
export type PrepareInPool = (
  body: Uint8Array | string,
  windows: Readonly<Record<string, number>> | null,
) => Promise<PoolPrepared> | null;

/**
 * A config's `prepare` over the process's pool: null when the config wants no workers, else a function that
 * prepares a body in a worker, or returns null while no worker has loaded the config (the router prepares
 * on the event loop then). `warm` loads the config in every worker (instance start).
 */
export function poolPreparer(
  config: PluginConfig,
  key: string,
): {
  prepare: (
    body: Uint8Array | string,
    windows?: Readonly<Record<string, number>> | null,
  ) => Promise<PoolPrepared> | null;
  warm: () => Promise<void>;
} | null {
  const p = decisionPoolFor(config);
  if (!p) return null;
  const settings = prepareSettings(config, p.size);
  // The windows the router knows (configured, and learned from the pods) in place of the config's alone; a
  // new settings object only when they change.
  let windowed = settings;
  // Made by the first prepare: preloadResources and resourcesSettled call poolPreparer only to warm.
  let sameBody: SameBodyMemo | null = null;
  return {
    prepare: (body, windows) => {
      if (windows !== undefined && windows !== windowed.maxModelLen)
        windowed = { ...settings, maxModelLen: windows };
      const memo = (sameBody ??= new SameBodyMemo());
      const known = memo.get(body, windowed);
      if (known !== undefined) return Promise.resolve(known);
      const asked = windowed;
      const prepared = p.prepare(key, asked, body, affinityOf(body));
      return (
        prepared?.then((r) => {
          memo.set(body, asked, r);
          return r;
        }) ?? null
      );
    },
    warm: () => p.warm(key, settings),
  };
}
