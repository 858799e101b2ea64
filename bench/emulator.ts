/**
 * bench:emulator — what the emulated vLLM engine predicts and what it costs to run.
 * 1. Calibration, in virtual time, per profile: cold prefill TTFT (16,256 and 16,384 tokens), a 16k shared-prefix
 *    hit, ITL from a short context to a full KV cache, and a decode's worst ITL while a 16k prefill runs beside it.
 * 2. Engine speed: the control workload (16,256-token prompts, 256 output tokens, Poisson arrivals) on one L40S
 *    pod in virtual time — wall time per simulated request and per engine step.
 * 3. Live overhead: streaming requests against an in-process emulated pod at time_scale 1 — client-observed TTFT
 *    minus the engine's own TTFT (HTTP, JSON, tokenization, timer lateness).
 * Writes bench/results/emulator.json.
 */
import './lib/usage/emulator.js'; // first: --help before the heavy imports
import { mkdirSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Engine } from '../emulator/engine/engine.js';
import { Rng } from '../emulator/engine/rng.js';
import type { StepOutcome, TokenOutput } from '../emulator/engine/types.js';
import { engineOptionsFor, PROFILES, type EngineProfile } from '../emulator/profiles.js';
import { startEmulatorFleet } from '../emulator/server/fleet.js';
import { parseFleetConfig } from '../src/config/fleet-config.js';
import { envCount } from './lib/cli.js';

const REQUESTS = envCount('bench:emulator', 'KINF_BENCH_REQUESTS', 120);
const LIVE_REQUESTS = envCount('bench:emulator', 'KINF_BENCH_LIVE', 40);

const prompt = (n: number, seed: number): number[] =>
  Array.from({ length: n }, (_, i) => 1 + ((i * 31 + seed * 977) % 90_000));

function drain(e: Engine): StepOutcome[] {
  const out: StepOutcome[] = [];
  for (let t = e.nextEventTimeMs(); t !== null; t = e.nextEventTimeMs())
    for (const o of e.advanceTo(t)) if (o.kind === 'step') out.push(o);
  return out;
}

function tokensOf(steps: StepOutcome[], id: string): TokenOutput[] {
  return steps.flatMap((s) => s.tokens.filter((t) => t.requestId === id));
}

function calibrate(p: EngineProfile): Record<string, number> {
  const alone = (n: number, out: number, cap?: number): TokenOutput[] => {
    const e = new Engine(engineOptionsFor(p, cap === undefined ? {} : { kvCapacityTokens: cap }));
    e.addRequest({ id: 'r', promptTokenIds: prompt(n, 1), maxTokens: out, ignoreEos: true }, 0);
    return tokensOf(drain(e), 'r');
  };
  const cold16256 = alone(16_256, 1)[0]?.latencyMs ?? NaN;
  const cold16384 = alone(16_384, 1)[0]?.latencyMs ?? NaN;
  const itlShort = alone(64, 9)[4]?.latencyMs ?? NaN;
  const itl16k = alone(16_500, 9)[4]?.latencyMs ?? NaN;
  // Shared prefix: 16,000 cached tokens + 256 new.
  const hit = new Engine(engineOptionsFor(p));
  const prefix = prompt(16_000, 7);
  hit.addRequest(
    { id: 'warm', promptTokenIds: [...prefix, ...prompt(256, 8)], maxTokens: 1, ignoreEos: true },
    0,
  );
  drain(hit);
  hit.addRequest(
    { id: 'hit', promptTokenIds: [...prefix, ...prompt(256, 9)], maxTokens: 1, ignoreEos: true },
    hit.clockMs + 1,
  );
  const sharedHit = tokensOf(drain(hit), 'hit')[0]?.latencyMs ?? NaN;
  // Four running contexts filling a 35,328-token cache: the largest per-step KV read.
  const full = new Engine(engineOptionsFor(p, { kvCapacityTokens: 35_328 }));
  const each = Math.floor((full.maxModelLen - 64) / 4) - 64;
  for (let i = 0; i < 4; i++)
    full.addRequest({ id: `f${i}`, promptTokenIds: prompt(each, i + 2), maxTokens: 20, ignoreEos: true }, 0);
  const fullSteps = drain(full).filter((s) => s.numPrefillTokens === 0 && s.scheduled.length === 4);
  const itlFull =
    fullSteps.length > 0
      ? (fullSteps.at(-1) as StepOutcome).endMs - (fullSteps.at(-1) as StepOutcome).startMs
      : NaN;
  // Chunked-prefill interference: a decode's worst gap while a 16k prefill runs on the same pod.
  const mix = new Engine(engineOptionsFor(p));
  mix.addRequest({ id: 'd', promptTokenIds: prompt(64, 2), maxTokens: 60, ignoreEos: true }, 0);
  mix.addRequest({ id: 'p', promptTokenIds: prompt(16_000, 3), maxTokens: 1, ignoreEos: true }, 100);
  const worst = Math.max(
    ...tokensOf(drain(mix), 'd')
      .filter((t) => !t.first)
      .map((t) => t.latencyMs),
  );
  return {
    cold_ttft_16256_ms: cold16256,
    cold_ttft_16384_ms: cold16384,
    shared_prefix_hit_ttft_ms: sharedHit,
    itl_short_context_ms: itlShort,
    itl_16k_context_ms: itl16k,
    itl_35k_running_context_ms: itlFull,
    decode_worst_itl_beside_16k_prefill_ms: worst,
  };
}

/** One pod's share of the published control load (~14 req/min over 3 pods). */
const CONTROL_RATE_PER_MIN = 4;

function engineSpeed(p: EngineProfile, requests: number, ratePerMin: number): Record<string, number> {
  const e = new Engine(engineOptionsFor(p));
  const rng = new Rng(42);
  let t = 0;
  let steps = 0;
  let finished = 0;
  let ttftSum = 0;
  let ttftN = 0;
  const start = performance.now();
  const consume = (now: number): void => {
    for (const o of e.advanceTo(now)) {
      if (o.kind !== 'step') continue;
      steps++;
      finished += o.finished.length;
      for (const tok of o.tokens)
        if (tok.first) {
          ttftSum += tok.latencyMs;
          ttftN++;
        }
    }
  };
  for (let i = 0; i < requests; i++) {
    t += (-Math.log(1 - rng.float()) * 60_000) / ratePerMin;
    consume(t);
    e.addRequest(
      { id: `c${i}`, promptTokenIds: prompt(16_256, 100 + i), maxTokens: 256, ignoreEos: true },
      t,
    );
  }
  for (let n = e.nextEventTimeMs(); n !== null; n = e.nextEventTimeMs()) consume(n);
  const wallMs = performance.now() - start;
  return {
    rate_per_min: ratePerMin,
    requests: finished,
    virtual_seconds: e.clockMs / 1000,
    engine_steps: steps,
    wall_ms: wallMs,
    wall_us_per_step: (wallMs * 1000) / steps,
    wall_ms_per_request: wallMs / finished,
    speedup_vs_real_time: e.clockMs / wallMs,
    mean_ttft_s: ttftSum / ttftN / 1000,
  };
}

async function ttftSumSeconds(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(/^vllm:time_to_first_token_seconds_sum\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? NaN);
}

async function liveOverhead(samples: number): Promise<Record<string, number>> {
  const cfg = parseFleetConfig(
    {
      models: { m: { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml', block_size: 16 } },
      pods: [{ id: 'p', model: 'm', address: '127.0.0.1:0' }],
      emulator: { profile: 'l40s-27b-fp8', time_scale: 1 },
    },
    'bench',
    process.cwd(),
  );
  const fleet = await startEmulatorFleet(cfg);
  const base = `http://${(fleet.pods[0] as { address: string }).address}`;
  const over: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const before = await ttftSumSeconds(base);
      const t0 = performance.now();
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'm',
          messages: [{ role: 'user', content: `question ${i}: ${'word '.repeat(200)}` }],
          max_tokens: 2,
          stream: true,
        }),
      });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let first = Number.NaN;
      let text = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        if (Number.isNaN(first) && text.includes('"content"')) first = performance.now() - t0;
      }
      // The engine's own TTFT (time_scale 1: engine ms = wall ms), from the pod's TTFT histogram sum.
      const engineTtftMs = ((await ttftSumSeconds(base)) - before) * 1000;
      over.push(first - engineTtftMs);
    }
  } finally {
    await fleet.close();
  }
  over.sort((a, b) => a - b);
  const q = (x: number) => over[Math.min(over.length - 1, Math.floor(x * over.length))] as number;
  return {
    samples,
    ttft_overhead_p50_ms: q(0.5),
    ttft_overhead_p90_ms: q(0.9),
    ttft_overhead_max_ms: over.at(-1) as number,
  };
}

async function main(): Promise<void> {
  const calibration: Record<string, Record<string, number>> = {};
  for (const p of Object.values(PROFILES)) calibration[p.name] = calibrate(p);
  const speed = engineSpeed(PROFILES['l40s-27b-fp8'] as EngineProfile, REQUESTS, CONTROL_RATE_PER_MIN);
  const live = await liveOverhead(LIVE_REQUESTS);
  const result = {
    generated_at: new Date().toISOString(),
    node: process.version,
    calibration,
    engine_speed_control_l40s: speed,
    live_overhead_time_scale_1: live,
  };
  console.log(JSON.stringify(result, null, 2));
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/emulator.json', `${JSON.stringify(result, null, 2)}\n`);
}

await main();
