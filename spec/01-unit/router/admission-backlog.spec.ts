import { describe, expect, it } from 'vitest';
import { DEFAULT_CALIBRATION, prefillBacklogMs, prefillBacklogTokens } from '../../../src/core/predictor.js';
import type { PodLookup, PodState } from '../../../src/core/types.js';
import { PluginConfigSchema, type PluginConfig } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { defaultPodState, MemoryKvIndex } from '../../../src/index/index.js';
import { createRouterMemory } from '../../../src/router/memory.js';
import { predictPods } from '../../../src/router/steps/predict.js';

/**
 * Issue #28, found in the seed run's control cell at 4 streams (bench/debug/cell-trace.ts): the router
 * drained its own backlog at the linear prefill rate, so a cold 16k-token prompt it sent looked prefilled
 * 5.4 s after the send while the pod needed 6.2 s. In that gap a pod still prefilling tied with one only decoding, and
 * the tie went by pod id: 3 of 36 requests in the window waited ~1 s behind another prefill and stalled its
 * decodes (goodput 10.7/min against round-robin's 11.0). With admission control on, the backlog drains over
 * each reservation's predicted prefill, attention term included; the default router is unchanged.
 */

const MODEL = 'm';
const NOW = 1_000_000;
const PROMPT = 16_256;
const config = (over: Record<string, unknown> = {}): PluginConfig =>
  validateConfig(PluginConfigSchema, { index: 'memory', ...over }, 'test');
// Both pods run one request by their last scrape, which came after both sends.
const state = (podId: string, over: Partial<PodState> = {}): PodState => ({
  ...defaultPodState({ model: MODEL, podId }),
  address: `10.0.0.${podId.length}:8000`,
  running: 1,
  lastScrapeAtMs: NOW - 100,
  lastEventAtMs: NOW - 100,
  ...over,
});
const lookup = (s: PodState): PodLookup => ({ state: s, prefixBlocks: { GPU: 0, CPU: 0, STORAGE: 0 } });
const cold = (podId: string, atMs: number) => ({ podId, atMs, uncachedTokens: PROMPT, promptTokens: PROMPT });

/** pod-a was sent a cold 16k prompt 5.6 s ago (still prefilling), pod-b one 12 s ago (decoding). */
function predictAfterSends(over: Record<string, unknown>): { a: number; b: number } {
  const memory = createRouterMemory(config(over), new MemoryKvIndex());
  memory.reservations.add(cold('pod-a', NOW - 5_600));
  memory.reservations.add(cold('pod-b', NOW - 12_000));
  const pods = [lookup(state('pod-a')), lookup(state('pod-b'))];
  const input = { pods, keys: [], promptTokens: PROMPT, maxTokens: 256, others: null, nowMs: NOW };
  const [a, b] = predictPods(memory, input).predictions;
  return { a: a!.predictedTtftMs, b: b!.predictedTtftMs };
}

describe('prefillBacklogMs: the backlog drained over each prefill, attention included', () => {
  it('keeps a cold 16k prefill on the books for its whole predicted time', () => {
    const cal = DEFAULT_CALIBRATION;
    const prefill = PROMPT * cal.prefillMsPerToken + (cal.attentionMsPerToken2 * PROMPT * PROMPT) / 2;
    expect(prefill).toBeCloseTo(6_157.3, 1);
    expect(prefillBacklogMs([cold('a', 0)], 5_600, cal)).toBeCloseTo(prefill - 5_600, 6);
    // The linear drain has it done by 5.4 s.
    expect(prefillBacklogTokens([cold('a', 0)], 5_600, cal.prefillMsPerToken)).toBe(0);
    // A hit prefills its few uncached tokens against the whole cached context.
    const hit = { podId: 'a', atMs: 0, uncachedTokens: 256, promptTokens: PROMPT };
    expect(prefillBacklogMs([hit], 0, cal)).toBeCloseTo(
      256 * cal.prefillMsPerToken + (cal.attentionMsPerToken2 * 256 * (2 * PROMPT - 256)) / 2,
      9,
    );
    // First come first served, an idle gap not banked, nothing left once drained.
    expect(prefillBacklogMs([cold('a', 100_000), cold('a', 0)], 100_000, cal)).toBeCloseTo(prefill, 6);
    expect(prefillBacklogMs([cold('a', 0)], 10_000, cal)).toBe(0);
    expect(prefillBacklogMs([], 0, cal)).toBe(0);
  });
});

describe('admission control: a pod still prefilling does not look free', () => {
  it('with the ITL guard on, the pod prefilling a prompt predicts its remaining prefill; off, they tie as before', () => {
    const on = predictAfterSends({ itl_slo_ms: 100, shed_ttft_slo_ms: 7_710 });
    expect(on.a - on.b).toBeGreaterThan(500);
    const off = predictAfterSends({});
    expect(off.a).toBe(off.b);
    expect(off.b).toBe(on.b);
  });
});
