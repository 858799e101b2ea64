import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runBench } from '../../../bench/lib/main.js';
import { latencyProfile, SMOKE_SCHEDULE } from '../../../bench/lib/schedule.js';
import { profileLabel } from '../../../bench/lib/types.js';

// The CI configuration of the discrete-event benchmark: emulator engine, real router, collector key path.
describe('bench:smoke (discrete-event, tiny schedule)', () => {
  it('produces a complete, sane report', { timeout: 240_000 }, async () => {
    // Written to a temporary directory, charts included: the report shows them (bench/lib/main.ts).
    const dir = mkdtempSync(join(tmpdir(), 'kinf-smoke-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const { results: r, markdown } = await runBench(SMOKE_SCHEDULE, {
      command: 'vitest smoke',
      workers: 0,
      progress: false,
      resultsDir: dir,
    });
    const written = readFileSync(join(dir, 'smoke.md'), 'utf8');
    expect(written).toBe(`${markdown}\n`);
    const images = [...written.matchAll(/!\[[^\]]+\]\((charts\/smoke-[^)]+\.svg)\)/g)].map((m) => m[1]!);
    expect(images[0]).toBe('charts/smoke-headline.svg');
    expect(images).toContain('charts/smoke-goodput-vs-concurrency.svg');
    for (const img of images) expect(existsSync(join(dir, img)), img).toBe(true);
    const s = r.schedule;
    // One group per workload × profile × arm, each with measured requests.
    expect(r.groups).toHaveLength(s.workloads.length * (1 + s.concurrency.length) * s.arms.length);
    for (const g of r.groups) {
      expect(g.requests).toBeGreaterThan(0);
      // Only the arm with admission control answers 429s (the gateway's, never a pod's).
      if (g.arm !== 'kinference-slo') expect(g.errored).toBe(0);
      expect(g.summary.ttft_ms.median).toBeGreaterThan(0);
      expect(g.summary.ttft_ms.percentiles.p95).toBeGreaterThanOrEqual(g.summary.ttft_ms.median);
      expect(g.summary.itl_ms.median).toBeGreaterThan(10);
    }
    // Every non-random arm compared with random on every profile, CIs ordered.
    expect(r.comparisons).toHaveLength(s.workloads.length * (1 + s.concurrency.length) * (s.arms.length - 1));
    for (const c of r.comparisons) expect(c.ttft.median.ci95[0]).toBeLessThanOrEqual(c.ttft.median.ci95[1]);
    for (const w of s.workloads) {
      expect(r.slo[w].ttftMs).toBeGreaterThan(1000);
      const lp = profileLabel(latencyProfile(s, w));
      const med = (arm: string): number =>
        r.groups.find((g) => g.workload === w && g.profile === lp && g.arm === arm)!.summary.ttft_ms.median;
      // The limit is never worse than random at the median.
      expect(med('oracle')).toBeLessThanOrEqual(med('random') * 1.001);
    }
    // Multiturn: routing on the KV index finds the conversation's pod; random mostly does not.
    const mt = profileLabel(latencyProfile(s, 'multiturn'));
    const k = r.groups.find((g) => g.workload === 'multiturn' && g.profile === mt && g.arm === 'kinference')!;
    const rnd = r.groups.find((g) => g.workload === 'multiturn' && g.profile === mt && g.arm === 'random')!;
    expect(k.hitRate).toBeGreaterThan(rnd.hitRate);
    expect(k.summary.ttft_ms.median).toBeLessThan(rnd.summary.ttft_ms.median);
    expect(k.fallbacks).toEqual({});
    expect(r.goodput.length).toBe(s.workloads.length * s.arms.length);
    expect(r.cdf.length).toBe(s.workloads.length * s.arms.length);
    expect(markdown).toContain('| target | wanted | measured | met |');
    // Admission control at the SLO keeps shared-prefix at c=8 within it where the plain router does not.
    const good = (arm: string): number =>
      r.goodput.find((g) => g.workload === 'shared-prefix' && g.arm === arm)!.byConcurrency['8']!;
    expect(good('kinference-slo')).toBeGreaterThan(good('kinference'));
  });
});
