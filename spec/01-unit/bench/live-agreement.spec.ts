import { describe, expect, it } from 'vitest';
import type { Arm } from '../../../bench/lib/arms/types.js';
import { cellEnvironment, simPods } from '../../../bench/lib/des/cell-setup.js';
import { fleetOf } from '../../../bench/lib/des/fleet.js';
import { runCell, type PathLatency } from '../../../bench/lib/des/run-cell.js';
import { compareModes, type ModeCell } from '../../../bench/lib/live/agreement.js';
import { loadModelSetup } from '../../../bench/lib/setup.js';
import { SMOKE_SCHEDULE } from '../../../bench/lib/schedule.js';
import type { Profile, RequestRecord } from '../../../bench/lib/types.js';
import { WorkloadFactory } from '../../../bench/lib/workload/workloads.js';

/** A cell whose successful requests have exactly these TTFTs (ms), all inside a 0–100 s window. */
function cell(ttfts: number[]): ModeCell {
  const records: RequestRecord[] = ttfts.map((t, i) => ({
    key: `k${i}`,
    conversationId: `c${i}`,
    turnIndex: 0,
    cluster: `c${i}`,
    pod: 'pod-0',
    status: 'successful',
    startMs: 1000 + i,
    firstTokenMs: 1000 + i + t,
    lastTokenMs: 2000 + i + t,
    endMs: 2001 + i + t,
    promptTokens: 100,
    outputTokens: 10,
    cachedTokens: 0,
  }));
  return { records, windowStartMs: 0, windowEndMs: 100_000, wallMs: 0 };
}
const spread = (base: number): number[] => Array.from({ length: 40 }, (_, i) => base + i);

describe('bench:live agreement', () => {
  it('reports the range of the twin’s realizations beside the request-level CI', () => {
    const twin = cell(spread(100));
    const replicates = [cell(spread(90)), cell(spread(130))];
    const r = compareModes('kinference', twin, cell(spread(100)), 200, 1, replicates);
    expect(r.realizations).toMatchObject({ n: 3 });
    expect(r.realizations!.median[0]).toBeLessThan(r.realizations!.median[1]);
    expect(r.realizations!.p95[0]).toBeLessThan(r.realizations!.p95[1]);
    expect(r.agree).toBe(true);
    // Far outside what one realization's requests allow: the CI excludes 0.
    expect(compareModes('kinference', twin, cell(spread(400)), 200, 1, replicates).agree).toBe(false);
  });

  it('judges a bimodal TTFT on its mean, where the median falls in either mode', () => {
    // Hits at 0.2 s and full prefills at 6 s; one more hit than half in the twin, one fewer live.
    const modes = (hits: number, misses: number): number[] => [
      ...Array.from({ length: hits }, (_, i) => 200 + i),
      ...Array.from({ length: misses }, (_, i) => 6000 + i),
    ];
    const r = compareModes('kinference-slo', cell(modes(51, 49)), cell(modes(49, 51)), 400, 1);
    expect(r.ttft.median.baseline).toBeLessThan(300);
    expect(r.ttft.median.treatment).toBeGreaterThanOrEqual(6000);
    // The medians' point estimates are 30× apart; the means 2% apart, and within the CI.
    const mean = (xs: number[]): number => xs.reduce((a, x) => a + x, 0) / xs.length;
    expect(r.ttft.mean.change).toBeCloseTo(mean(modes(49, 51)) / mean(modes(51, 49)) - 1, 9);
    expect(Math.abs(r.ttft.mean.change)).toBeLessThan(0.05);
    expect(r.agreeOn.mean).toBe(true);
    // A real shift of the mixture (a third of the hits lost) is outside the mean's CI.
    expect(compareModes('x', cell(modes(51, 49)), cell(modes(34, 66)), 400, 1).agreeOn.mean).toBe(false);
  });

  it('has no realization range without replicates', () => {
    const r = compareModes('random', cell(spread(100)), cell(spread(100)), 200, 1);
    expect(r.realizations).toBeNull();
    expect(r.agree).toBe(true);
  });

  it(
    'jitters each request’s path by [0, maxMs) in the DES, reproducibly per stream',
    { timeout: 60_000 },
    async () => {
      const s = SMOKE_SCHEDULE;
      const m = await loadModelSetup();
      const fleet = fleetOf(s, m);
      const arm: Arm = { name: 'random', choose: () => ({ podId: 'pod-0' }) };
      const profile: Profile = { kind: 'concurrent', streams: 1, warmupS: 0, measureS: 30, cooldownS: 0 };
      const run = async (latency: PathLatency): Promise<RequestRecord[]> =>
        (
          await runCell({
            arm,
            factory: new WorkloadFactory('shared-prefix', s.shapes, m.synth, s.seed, 0),
            profile,
            pods: simPods(fleet, s.seed, 0),
            ...cellEnvironment(m, fleet),
            latency,
            seed: s.seed,
            trial: 0,
            feed: null,
            trackBlockHashes: false,
          })
        ).records;
      const ttft = (r: RequestRecord): number => r.firstTokenMs! - r.startMs;
      const plain = await run(fleet.latency);
      const jittered = await run({ ...fleet.latency, jitter: { maxMs: 5, stream: 1 } });
      const again = await run({ ...fleet.latency, jitter: { maxMs: 5, stream: 1 } });
      // One stream on an idle pod: the first request's TTFT grows by exactly its jitter.
      const extra = ttft(jittered[0]!) - ttft(plain[0]!);
      expect(extra).toBeGreaterThanOrEqual(0);
      expect(extra).toBeLessThan(5);
      expect(jittered.map(ttft)).toEqual(again.map(ttft));
      expect(jittered.map(ttft)).not.toEqual(plain.map(ttft));
    },
  );
});
