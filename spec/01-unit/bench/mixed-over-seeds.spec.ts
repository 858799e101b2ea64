import { describe, expect, it } from 'vitest';
import type { ArmRow, MixedReport } from '../../../bench/lib/mixed/mixed-bench.js';
import { pooledMarkdown, pooledOverSeeds, type SeedRun } from '../../../bench/lib/mixed/over-seeds.js';
import type { TenantFigures } from '../../../bench/lib/mixed/tenant-metrics.js';

// bench:mixed --seeds: the goals pooled over seeds are sums of goodput over sums of their references, and the
// chat's p95 over every seed's requests (not a mean of per-seed p95s).
const fig = (goodputPerMin: number, ttftP95Ms: number | null = null): TenantFigures => ({
  sent: 0,
  refused: {},
  completedPerMin: goodputPerMin,
  goodputPerMin,
  ttftP50Ms: null,
  ttftP95Ms,
  acceptedPromptTokensPerMin: [],
});

function run(
  seed: number,
  o: { chat: number; solo: number; batch: number; left: number; free: number[]; ttfts: number[] },
): SeedRun {
  const row: ArmRow = {
    arm: 'kinference+policies',
    chat: fig(o.chat, Math.max(...o.ttfts)),
    nightly: fig(o.batch),
    free: fig(0),
    goals: {
      chatP95WithinObjective: true,
      chatGoodputVsSolo: o.chat / o.solo,
      batchGoodputVsLeft: o.batch / o.left,
      freeAcceptedVsLimit: o.free,
    },
    wallMs: 0,
  };
  const report = {
    reference: {
      chatSolo: { random: fig(99), kinference: fig(o.solo) },
      batchLeftPerMin: o.left,
    },
    arms: [row],
  } as unknown as MixedReport;
  return { seed, report, chatTtfts: new Map([['kinference+policies', o.ttfts]]) };
}

describe('bench:mixed over seeds', () => {
  const runs = [
    run(42, { chat: 15, solo: 15, batch: 4, left: 8, free: [0.999, 0.999], ttfts: [100, 200, 300, 5000] }),
    run(43, {
      chat: 14,
      solo: 14.5,
      batch: 12,
      left: 8,
      free: [1.03],
      ttfts: Array.from({ length: 36 }, (_, i) => 100 + i),
    }),
  ];

  it('sums goodput over the sums of the references, per arm', () => {
    const [p] = pooledOverSeeds(runs);
    expect(p!.chatGoodputVsSolo).toBeCloseTo(29 / 29.5, 9);
    expect(p!.batchGoodputVsLeft).toBeCloseTo(16 / 16, 9);
    expect(p!.batchGoodputVsLeftBySeed).toEqual([0.5, 1.5]);
  });

  it("takes the chat's p95 over every seed's requests", () => {
    const [p] = pooledOverSeeds(runs);
    // 40 TTFTs; the one 5,000 ms outlier is above the 95th percentile of the pool, not at it.
    expect(p!.chatP95Ms).toBeLessThan(1000);
    expect(p!.chatP95MsBySeed).toEqual([5000, 135]);
  });

  it("reports the limited tenant's worst minute over every seed", () => {
    const [p] = pooledOverSeeds(runs);
    expect(p!.freeWorstOff).toBeCloseTo(0.03, 9);
    expect(pooledMarkdown(runs, 4103)).toMatch(/\| kinference\+policies \| \d+ ✓ .*\| 3\.0% ✗ \|/);
  });
});
