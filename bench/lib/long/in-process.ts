// bench:overhead's long shapes: the router in this process, 100k/240k-token contexts, 8 and 96 pods.
import { Redis } from 'ioredis';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { createKvIndex } from '../../../src/index/index.js';
import { createRouter, requestKeys, type RouteOutcome } from '../../../src/router/index.js';
import { createPromptTokenizer, loadChatTemplate, loadTokenizer } from '../../../src/tokenize/index.js';
import { SEGMENT_CACHE_BYTES } from '../../../src/router/resources.js';
import { startRedisServer } from '../../../harness/redis-server.js';
import { Rng } from '../rng.js';
import { percentile } from '../stats/percentile.js';
import { TextSynth } from '../workload/synth.js';
import { loadWordVocab } from '../workload/vocab.js';
import { chatBody, longContext, newTurn, seedHoldings, type Holdings } from './shapes.js';

const MODEL = 'Qwen/Qwen3-8B';

export interface LongShape {
  tokens: number;
  pods: number;
}

export const LONG_SHAPES: LongShape[] = [
  { tokens: 100_000, pods: 8 },
  { tokens: 100_000, pods: 96 },
  { tokens: 240_000, pods: 8 },
  { tokens: 240_000, pods: 96 },
];

/** Blocks of other conversations per pod (index size beside the context's own entries). */
export const FILLER_BLOCKS_PER_POD = 2_000;

export type Case = 'new_turn' | 'same_body' | 'never_seen';
const STEPS = ['parseMs', 'templateMs', 'tokenizeMs', 'keysMs', 'lookupMs', 'predictMs', 'totalMs'] as const;

export interface CaseStats {
  n: number;
  p50: Record<string, number>;
  p99: Record<string, number>;
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;

function caseStats(outs: RouteOutcome[]): CaseStats {
  const p50: Record<string, number> = {};
  const p99: Record<string, number> = {};
  for (const s of STEPS) {
    const xs = outs.map((o) => o.timings[s]);
    p50[s.replace(/Ms$/, '')] = r3(percentile(xs, 0.5));
    p99[s.replace(/Ms$/, '')] = r3(percentile(xs, 0.99));
  }
  return { n: outs.length, p50, p99 };
}

export interface ShapeResult {
  tokens: number;
  pods: number;
  promptTokens: number;
  blocks: number;
  holdings: Holdings;
  chosenCachedTokens: number | null;
  cases: Record<Case, CaseStats>;
  /** Redis server time per EVALSHA (lookups, and the shared-reservations reads if on) over the warm cases. */
  redisServerUsPerLookup: number;
  /** This process's heap after the shape (bench texts included), MB. */
  heapUsedMb: number;
  segmentCache: { entries: number; bytes: number };
}

async function evalshaStats(url: string): Promise<{ calls: number; usec: number }> {
  const c = new Redis(url);
  try {
    const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await c.info('commandstats'));
    return m ? { calls: Number(m[1]), usec: Number(m[2]) } : { calls: 0, usec: 0 };
  } finally {
    c.disconnect();
  }
}

/** A router configured as the plugin is for these prompts: max_prompt_tokens above the longest one. */
export function longConfig(redisUrl: string, qwenDir: string): Record<string, unknown> {
  return {
    index: 'redis',
    redis_url: redisUrl,
    tokenizer: `hf:${qwenDir}tokenizer.json`,
    chat_template: `hf:${qwenDir}tokenizer_config.json`,
    redis_timeout_ms: 1000,
    max_prompt_tokens: 262_144,
    stale_after_ms: 3_600_000,
  };
}

export async function runLongShapes(
  qwenDir: string,
  runs: { warm: number; cold: number },
  shapes: LongShape[] = LONG_SHAPES,
  log: (s: string) => void = console.log,
): Promise<ShapeResult[]> {
  const results: ShapeResult[] = [];
  const tokenizer = loadTokenizer(`hf:${qwenDir}tokenizer.json`);
  const synth = new TextSynth(tokenizer, await loadWordVocab(`${qwenDir}tokenizer.json`, tokenizer));
  const template = loadChatTemplate(`hf:${qwenDir}tokenizer_config.json`);
  for (const shape of shapes) {
    const redis = await startRedisServer();
    const config = validateConfig(PluginConfigSchema, longConfig(redis.url, qwenDir), 'bench');
    const index = createKvIndex({
      kind: 'redis',
      url: redis.url,
      keyPrefix: config.redis_key_prefix,
      lookupTimeoutMs: 1000,
    });
    let promptTokenizer = createPromptTokenizer(tokenizer, { maxBytes: SEGMENT_CACHE_BYTES });
    const router = createRouter(config, {
      index,
      template: () => template,
      promptTokenizer: () => promptTokenizer,
    });
    try {
      const rng = new Rng(shape.tokens + shape.pods);
      const ctx = await longContext(synth, `k${shape.tokens}`, shape.tokens, 7);
      const known = chatBody(MODEL, ctx.messages);
      const keys = await requestKeys(config, known);
      const systemKeys = await requestKeys(config, chatBody(MODEL, ctx.messages.slice(0, 1)));
      const holdings = await seedHoldings(
        index,
        MODEL,
        shape.pods,
        keys,
        Math.max(0, systemKeys.length - 1),
        FILLER_BLOCKS_PER_POD,
        shape.pods,
      );
      const check = (o: RouteOutcome): RouteOutcome => {
        if (o.fallbackReason) throw new Error(`unexpected fallback ${o.fallbackReason}: ${o.fallbackDetail}`);
        return o;
      };
      // Warm-up: the known context once (its segments enter the cache), and the JIT.
      await router.route(known);
      const turns: string[] = [];
      for (let i = 0; i < runs.warm; i++) turns.push(chatBody(MODEL, await newTurn(synth, ctx, i, rng)));
      const fresh: string[] = [];
      for (let i = 0; i < runs.cold; i++)
        fresh.push(
          chatBody(
            MODEL,
            (await longContext(synth, `n${shape.tokens}x${i}`, shape.tokens, 100 + i)).messages,
          ),
        );

      const outs: Record<Case, RouteOutcome[]> = { new_turn: [], same_body: [], never_seen: [] };
      const before = await evalshaStats(redis.url);
      let last: RouteOutcome | null = null;
      for (const b of turns) {
        last = check(await router.route(b));
        outs.new_turn.push(last);
        const again = check(await router.route(b));
        outs.same_body.push(again);
        router.observe(last, null);
        router.observe(again, null);
      }
      const after = await evalshaStats(redis.url);
      const redisUsPerLookup = Math.round(
        (after.usec - before.usec) / Math.max(1, after.calls - before.calls),
      );
      for (const b of fresh) {
        promptTokenizer = createPromptTokenizer(tokenizer, { maxBytes: SEGMENT_CACHE_BYTES });
        await router.route(known); // the cache holds other contexts, as in any running gateway
        outs.never_seen.push(check(await router.route(b)));
      }
      global.gc?.();
      const cases = {
        new_turn: caseStats(outs.new_turn),
        same_body: caseStats(outs.same_body),
        never_seen: caseStats(outs.never_seen),
      };
      const st = promptTokenizer.stats();
      const res: ShapeResult = {
        tokens: shape.tokens,
        pods: shape.pods,
        promptTokens: last!.promptTokens,
        blocks: last!.blocks,
        holdings,
        chosenCachedTokens: last!.decision.chosen?.cachedTokens ?? null,
        cases,
        redisServerUsPerLookup: redisUsPerLookup,
        heapUsedMb: Math.round(process.memoryUsage().heapUsed / 1e5) / 10,
        segmentCache: { entries: st.entries, bytes: st.bytes },
      };
      results.push(res);
      const line = (c: Case): string =>
        `    ${c.padEnd(10)} p50 ${STEPS.map((s) => `${s.replace(/Ms$/, '')} ${cases[c].p50[s.replace(/Ms$/, '')]!.toFixed(2)}`).join(' | ')}; total p99 ${cases[c].p99.total!.toFixed(2)}`;
      log(
        `${shape.tokens / 1000}k tokens (${res.promptTokens} with the template, ${res.blocks} blocks), ${shape.pods} pods, ${holdings.entries} entries, chosen cached ${res.chosenCachedTokens}; Redis ${redisUsPerLookup} µs per lookup; heap ${res.heapUsedMb} MB:`,
      );
      for (const c of ['new_turn', 'same_body', 'never_seen'] as const) log(line(c));
    } finally {
      await router.close();
      await redis.stop();
    }
  }
  return results;
}
