import { describe, expect, it } from 'vitest';
import { Engine } from '../../../emulator/engine/engine.js';
import type { StepOutcome, TokenOutput } from '../../../emulator/engine/types.js';
import { engineOptionsFor, PROFILES } from '../../../emulator/profiles.js';
import { drain, prompt } from './engine-harness.js';

/** Token latencies of one request running alone, in virtual time (no wall clock involved). */
function alone(engine: Engine, promptTokens: number, outputTokens: number): TokenOutput[] {
  engine.addRequest(
    { id: 'r', promptTokenIds: prompt(promptTokens, 1), maxTokens: outputTokens, ignoreEos: true },
    0,
  );
  return drain(engine).flatMap((o) => (o.kind === 'step' ? o.tokens : []));
}

describe.each(Object.values(PROFILES))('profile $name calibration (virtual time)', (profile) => {
  it('cold 16k-token prefill TTFT is within the documented range', () => {
    const tokens = alone(new Engine(engineOptionsFor(profile)), 16_384, 1);
    const ttft = tokens[0]?.latencyMs ?? NaN;
    expect(ttft).toBeGreaterThanOrEqual(profile.expect.cold16kTtftMs[0]);
    expect(ttft).toBeLessThanOrEqual(profile.expect.cold16kTtftMs[1]);
  });

  it('ITL is within the documented range, from a short context to a full KV cache', () => {
    const [lo, hi] = profile.expect.itlMs;
    const short = alone(new Engine(engineOptionsFor(profile)), 64, 8).slice(1);
    const long = alone(new Engine(engineOptionsFor(profile)), 16_500, 8).slice(1);
    for (const t of [...short, ...long]) {
      expect(t.latencyMs).toBeGreaterThanOrEqual(lo);
      expect(t.latencyMs).toBeLessThanOrEqual(hi);
    }
    // 35k tokens of running context (the L40S cache, full): the per-step KV read is at its largest.
    const e = new Engine(engineOptionsFor(profile, { kvCapacityTokens: 35_328 }));
    const n = 4;
    const each = Math.floor((e.maxModelLen - 64) / n) - 64;
    for (let i = 0; i < n; i++)
      e.addRequest({ id: `f${i}`, promptTokenIds: prompt(each, i + 2), maxTokens: 40, ignoreEos: true }, 0);
    const steps = drain(e).filter((o): o is StepOutcome => o.kind === 'step');
    const decodeOnly = steps.filter((s) => s.numPrefillTokens === 0 && s.scheduled.length === n);
    expect(decodeOnly.length).toBeGreaterThan(10);
    for (const s of decodeOnly) expect(s.endMs - s.startMs).toBeLessThanOrEqual(hi + 1);
  });

  it('a 2048-token chunk stalls co-running decodes (chunked-prefill interference)', () => {
    const e = new Engine(engineOptionsFor(profile));
    e.addRequest({ id: 'd2', promptTokenIds: prompt(64, 2), maxTokens: 50, ignoreEos: true }, 0);
    e.addRequest({ id: 'p', promptTokenIds: prompt(16_000, 3), maxTokens: 1, ignoreEos: true }, 100);
    const itl = drain(e)
      .flatMap((o) => (o.kind === 'step' ? o.tokens : []))
      .filter((t) => t.requestId === 'd2' && !t.first)
      .map((t) => t.latencyMs);
    expect(Math.max(...itl)).toBeGreaterThan(5 * profile.expect.itlMs[1]);
  });
});
