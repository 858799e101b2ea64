import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLiveCell } from '../../bench/lib/live/run-live-cell.js';
import { resetPrefixCaches, startLiveStack, type LiveStack } from '../../bench/lib/live/stack.js';
import { loadModelSetup, type ModelSetup } from '../../bench/lib/setup.js';
import type { Profile } from '../../bench/lib/types.js';
import { PUBLISHED_SHAPES, WorkloadFactory } from '../../bench/lib/workload/workloads.js';

const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));

// bench:live's real-process cell, small and fast: Redis, emulator pods, collector, the Kong stand-in with the
// plugin in kong-js-pluginserver. Every request must come back with the pod that served it.
describe('bench:live cell against the real stack', () => {
  let stack: LiveStack;
  let m: ModelSetup;
  const timeScale = 20;
  beforeAll(async () => {
    m = await loadModelSetup();
    stack = await startLiveStack({
      pods: 3,
      profile: 'l40s-27b-fp8',
      kvCapacityTokens: 94_208,
      timeScale,
      seed: 42,
      scrapeIntervalMs: 1000,
      model: m,
      cli,
    });
  }, 120_000);
  afterAll(async () => stack?.stop());

  const profile: Profile = {
    kind: 'poisson',
    rate: 0.2,
    warmupS: 0,
    measureS: 160,
    cooldownS: 0,
    clientWorkers: 4,
  };
  const run = async (arm: 'random' | 'kinference') => {
    await resetPrefixCaches(stack);
    return runLiveCell({
      arm,
      stack,
      factory: new WorkloadFactory('multiturn', PUBLISHED_SHAPES, m.synth, 42, 0),
      profile,
      timeScale,
      model: m,
      seed: 42,
      trial: 0,
      randomRouting: 'per-connection',
    });
  };

  it(
    'kinference: names each request’s pod from the gateway’s file-log; follow-ups find their history',
    { timeout: 120_000 },
    async () => {
      const r = await run('kinference');
      const ids = stack.pods.map((p) => p.id);
      const done = r.records.filter((x) => x.status === 'successful');
      expect(done.length).toBeGreaterThan(10);
      for (const x of done) expect(ids).toContain(x.pod);
      const follow = done.filter((x) => x.turnIndex > 0);
      expect(follow.length).toBeGreaterThan(0);
      expect(follow.filter((x) => x.cachedTokens > 0).length).toBeGreaterThanOrEqual(0.8 * follow.length);
    },
  );

  it('random: sends straight to the pods kube-proxy picks, same schedule', { timeout: 120_000 }, async () => {
    const r = await run('random');
    const ids = stack.pods.map((p) => p.id);
    const done = r.records.filter((x) => x.status === 'successful');
    expect(done.length).toBeGreaterThan(10);
    for (const x of done) expect(ids).toContain(x.pod);
  });
});
