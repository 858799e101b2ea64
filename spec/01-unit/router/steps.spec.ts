import { describe, expect, it } from 'vitest';
import { KinferenceError } from '../../../src/core/errors.js';
import type { LookupResult, PodLookup, PodState } from '../../../src/core/types.js';
import { PluginConfigSchema, type PluginConfig } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';
import { defaultPodState, MemoryKvIndex } from '../../../src/index/index.js';
import { createRouterMemory } from '../../../src/router/memory.js';
import { emptyOutcome } from '../../../src/router/outcome.js';
import { choosePod } from '../../../src/router/steps/choose.js';
import { fallback } from '../../../src/router/steps/fallback.js';
import { lookupPods, routableCandidates } from '../../../src/router/steps/lookup.js';
import { predictPods } from '../../../src/router/steps/predict.js';
import { StepFallback } from '../../../src/router/steps/step-fallback.js';
import { Stopwatch } from '../../../src/router/stopwatch.js';

/**
 * The router's steps (src/router/steps) one by one, with explicit inputs: the in-memory index, a controlled
 * clock, and a stopwatch on a counter clock (each reading is 1 ms after the last).
 */

const MODEL = 'm';
const NOW = 1_000_000;
const config = (over: Record<string, unknown> = {}): PluginConfig =>
  validateConfig(PluginConfigSchema, { index: 'memory', ...over }, 'test');
const state = (podId: string, over: Partial<PodState> = {}): PodState => ({
  ...defaultPodState({ model: MODEL, podId }),
  address: `10.0.0.${podId.length}:8000`,
  lastScrapeAtMs: NOW,
  lastEventAtMs: NOW,
  ...over,
});
const lookup = (s: PodState): PodLookup => ({ state: s, prefixBlocks: { GPU: 0, CPU: 0, STORAGE: 0 } });
/** The in-memory index, answering lookups with `answer` (and counting them). */
class ScriptedIndex extends MemoryKvIndex {
  lookups = 0;
  constructor(readonly answer: () => Promise<LookupResult>) {
    super();
  }
  override lookup(): Promise<LookupResult> {
    this.lookups++;
    return this.answer();
  }
}
const counter = (): (() => number) => {
  let t = 0;
  return () => ++t;
};

describe('Stopwatch: one timer for every step', () => {
  it('adds each run of a step to its field, counts a step that throws, and sets totalMs when stopped', async () => {
    const watch = new Stopwatch(counter()); // start: 1
    expect(watch.time('parseMs', () => 'parsed')).toBe('parsed'); // 2 → 3
    expect(() =>
      watch.time('templateMs', () => {
        throw new Error('bad template');
      }),
    ).toThrow('bad template'); // 4 → 5
    await watch.timeAsync('lookupMs', async () => undefined); // 6 → 7
    await watch.timeAsync('lookupMs', async () => undefined); // 8 → 9
    expect(watch.stop()).toEqual({
      parseMs: 1,
      templateMs: 1,
      tokenizeMs: 0,
      keysMs: 0,
      lookupMs: 2,
      predictMs: 0,
      totalMs: 9,
    });
  });
});

describe('lookup step', () => {
  it('tells a timeout from another index error, with the error code in the bounded detail', async () => {
    const memory = createRouterMemory(config({ redis_timeout_ms: 50 }), new MemoryKvIndex());
    const failing = (e: unknown) => createRouterMemory(config(), new ScriptedIndex(() => Promise.reject(e)));
    const late = await lookupPods(
      failing(new KinferenceError('KINF_ERR_REDIS_TIMEOUT', 'no answer')),
      MODEL,
      [],
      NOW,
    );
    expect(late).toEqual(new StepFallback('index_timeout', 'KINF_ERR_REDIS_TIMEOUT: no answer'));
    const down = await lookupPods(failing(new Error('x'.repeat(500))), MODEL, [], NOW);
    expect(down).toEqual(new StepFallback('index_error', 'x'.repeat(300)));
    expect(await lookupPods(memory, MODEL, [], NOW)).toEqual({ pods: [], others: new Map() });
    const unshared = createRouterMemory(config({ share_reservations: false }), new MemoryKvIndex());
    expect(await lookupPods(unshared, MODEL, [], NOW)).toEqual({ pods: [], others: null });
  });

  it('keeps the pods Kong can be sent to, remembers them, and falls back when there are none', () => {
    const memory = createRouterMemory(config(), new MemoryKvIndex());
    expect(routableCandidates(memory, MODEL, [])).toEqual(
      new StepFallback('no_pods_in_index', 'no pods registered for model m'),
    );
    const [a, noAddress] = [state('pod-a'), state('pod-bb', { address: '' })];
    expect(routableCandidates(memory, MODEL, [lookup(a), lookup(noAddress)])).toEqual([lookup(a)]);
    expect(memory.lastKnownPods.get(MODEL)).toEqual([a]);
    const none = routableCandidates(memory, MODEL, [lookup(noAddress)]);
    expect(none).toEqual(
      new StepFallback('no_pods_in_index', 'no pod of model m has a host:port address: pod-bb ""'),
    );
    expect(memory.lastKnownPods.get(MODEL)).toEqual([]);
  });
});

describe('choose step', () => {
  it('with no healthy pod says which pods were out, and with fallback kong-default chooses none', () => {
    const pods = [lookup(state('pod-a', { healthy: false })), lookup(state('pod-bb', { healthy: false }))];
    for (const fb of ['least-loaded', 'kong-default'] as const) {
      const memory = createRouterMemory(config({ fallback: fb }), new MemoryKvIndex());
      memory.failures.failed('pod-bb', NOW, 1, 1, 'gateway error 502');
      const input = { pods, keys: [], promptTokens: 100, maxTokens: null, others: null, nowMs: NOW };
      const { predictions, skipped } = predictPods(memory, input);
      expect([...skipped]).toEqual(['pod-bb']);
      const choice = choosePod(memory.config, predictions, skipped, false);
      expect(choice.fallbackReason).toBe('all_pods_unhealthy');
      expect(choice.fallbackDetail).toBe(
        'no healthy pod: pod-a unhealthy (collector), pod-bb upstream failures',
      );
      expect(choice.decision.candidates.map((p) => p.podId)).toEqual(['pod-a', 'pod-bb']);
      expect(choice.decision.chosen?.podId ?? null).toBe(fb === 'least-loaded' ? 'pod-a' : null);
    }
  });

  it('names a truncated prompt as the reason when the decision itself has none', () => {
    const memory = createRouterMemory(config(), new MemoryKvIndex());
    const input = {
      pods: [lookup(state('pod-a'))],
      keys: [],
      promptTokens: 100,
      maxTokens: null,
      others: null,
      nowMs: NOW,
    };
    const { predictions, skipped } = predictPods(memory, input);
    expect(choosePod(memory.config, predictions, skipped, true).fallbackReason).toBe('prompt_truncated');
    expect(choosePod(memory.config, predictions, skipped, false).fallbackReason).toBeNull();
  });
});

describe('fallback: one context object', () => {
  const ctx = (reason: 'body_not_chat' | 'index_error', watch: Stopwatch) => ({
    reason,
    detail: 'why',
    model: MODEL,
    lora: null,
    promptTokens: 40,
    truncated: false,
    promptChars: { cached: 0, tokenized: 0 },
    watch,
    nowMs: NOW,
  });

  it('after an index error ranks the last known pods on load alone, without asking the index again', async () => {
    const index = new ScriptedIndex(async () => ({ pods: [] }));
    const memory = createRouterMemory(config(), index);
    memory.lastKnownPods.set(MODEL, [state('pod-a', { waiting: 30 }), state('pod-bb')]);
    const watch = new Stopwatch(counter());
    const { route, uncachedTokens } = await fallback(memory, ctx('index_error', watch));
    expect(index.lookups).toBe(0);
    expect(route.decision.chosen?.podId).toBe('pod-bb');
    expect(route.decision.fallbackReason).toBe('index_error');
    expect(route.fallbackDetail).toBe('why');
    expect(uncachedTokens).toBe(40);
    expect(watch.timings.lookupMs).toBe(0);
    expect(watch.timings.predictMs).toBe(1);
  });

  it('for a body not read as chat asks the index for the pods once, timed as lookup', async () => {
    const index = new MemoryKvIndex();
    await index.upsertPodState(
      { model: MODEL, podId: 'pod-a' },
      { address: '10.0.0.1:8000', lastScrapeAtMs: NOW },
    );
    const memory = createRouterMemory(config(), index);
    const watch = new Stopwatch(counter());
    const { route } = await fallback(memory, ctx('body_not_chat', watch));
    expect(route.decision.chosen?.podId).toBe('pod-a');
    expect(route.fallbackReason).toBe('body_not_chat');
    expect(watch.timings.lookupMs).toBe(1);
    expect(memory.lastKnownPods.get(MODEL)?.map((p) => p.podId)).toEqual(['pod-a']);
  });

  it('leaves Kong’s target with fallback kong-default, without looking anything up', async () => {
    const memory = createRouterMemory(config({ fallback: 'kong-default' }), new MemoryKvIndex());
    memory.lastKnownPods.set(MODEL, [state('pod-a')]);
    const watch = new Stopwatch(counter());
    const { route, uncachedTokens } = await fallback(memory, ctx('index_error', watch));
    expect(route.decision).toEqual({ candidates: [], chosen: null, fallbackReason: 'index_error' });
    expect(uncachedTokens).toBe(0);
    expect(watch.timings).toEqual(new Stopwatch(counter()).timings);
  });
});

describe('emptyOutcome: the outcome of a request the router never saw', () => {
  it('keeps Kong’s target, reserves nothing, and gives each outcome timings of its own', () => {
    const a = emptyOutcome('body_compressed', 'the body is compressed');
    expect(a).toMatchObject({
      target: null,
      decision: { candidates: [], chosen: null, fallbackReason: 'body_compressed' },
      fallbackReason: 'body_compressed',
      fallbackDetail: 'the body is compressed',
      model: null,
      shed: null,
      reservationId: null,
      flightId: null,
      kvReuseReport: false,
    });
    a.timings.totalMs = 5;
    a.promptChars.cached = 5;
    const b = emptyOutcome('body_empty', 'the body is empty');
    expect(b.timings.totalMs).toBe(0);
    expect(b.promptChars.cached).toBe(0);
  });
});
