import { describe, expect, it } from 'vitest';
import {
  arrivalSlots,
  guidellmPoissonSlots,
  poissonSlots,
  pythonExpovariate,
} from '../../../bench/lib/workload/arrivals.js';
import { Rng } from '../../../bench/lib/rng.js';
import { scheduleFromArgs } from '../../../bench/lib/cli-args.js';
import { latencyProfile, SEED_SCHEDULE } from '../../../bench/lib/schedule.js';
import { profileLabel } from '../../../bench/lib/types.js';

// From CPython 3: [random.Random(42).expovariate(0.5) for _ in range(12)] and Random(7).expovariate(2.0).
const PY_42_HALF = [
  2.040120574549602, 0.05065767808547778, 0.6432481281499312, 0.5051723713402271, 2.667185345616166,
  2.2583460175971855, 4.454576199102761, 0.1819048092131323, 1.0960923187929819, 0.060500354414717177,
  0.49343339191964863, 1.4078310557323068,
];
const PY_7_TWO = [0.19565742211740214, 0.08175922850273908, 0.5262478090354634];

describe("GuideLLM's Python random stream", () => {
  it("draws exactly CPython's random.Random(seed).expovariate(rate)", () => {
    const a = pythonExpovariate(42, 0.5);
    for (const v of PY_42_HALF) expect(a()).toBeCloseTo(v, 13);
    const b = pythonExpovariate(7, 2);
    for (const v of PY_7_TWO) expect(b()).toBeCloseTo(v, 13);
  });

  it('rejects a seed Python would split into several words', () => {
    expect(() => pythonExpovariate(2 ** 32, 1)).toThrow(/random_seed/);
    expect(() => pythonExpovariate(1.5, 1)).toThrow(/random_seed/);
  });
});

describe("GuideLLM's poisson strategy with worker processes", () => {
  it('deals the same gap to every worker in turn: rounds of `workers` requests at one gap', () => {
    const slots = guidellmPoissonSlots({ ratePerS: 0.5, durationMs: 60_000, workers: 10, seed: 42 });
    const gaps = slots.map((s, i) => s.atMs - (i === 0 ? 0 : slots[i - 1]!.atMs));
    // Round 1: every worker's first draw (2.04 s); round 2: every worker's second draw (0.05 s), ...
    for (let i = 0; i < 10; i++) expect(gaps[i]).toBeCloseTo(PY_42_HALF[0]! * 1000, 6);
    for (let i = 10; i < 20; i++) expect(gaps[i]).toBeCloseTo(PY_42_HALF[1]! * 1000, 6);
    for (let i = 20; i < 30; i++) expect(gaps[i]).toBeCloseTo(PY_42_HALF[2]! * 1000, 6);
    // Workers take their slots in a fixed rotation, so each owns every tenth request.
    expect(slots.slice(0, 20).map((s) => s.worker)).toEqual([...Array(10).keys(), ...Array(10).keys()]);
    expect(slots.every((s, i) => i === 0 || s.atMs >= slots[i - 1]!.atMs)).toBe(true);
    expect(slots.at(-1)!.atMs).toBeLessThanOrEqual(60_000);
  });

  it('with one worker it is the plain cumulative Python stream (a Poisson process)', () => {
    const slots = guidellmPoissonSlots({ ratePerS: 0.5, durationMs: 10_000, workers: 1, seed: 42 });
    let t = 0;
    const expected = [];
    for (const g of PY_42_HALF) {
      t += g * 1000;
      if (t > 10_000) break;
      expected.push(t);
    }
    expect(slots.map((s) => s.atMs)).toEqual(expected.map((x) => expect.closeTo(x, 6)));
  });

  it('keeps the mean rate but is far burstier than Poisson', () => {
    const dur = 2_000_000;
    const g = guidellmPoissonSlots({ ratePerS: 0.5, durationMs: dur, workers: 10, seed: 42 });
    const p = poissonSlots(0.5, dur, new Rng(42));
    // Counts per 20 s window: same mean, much larger variance (whole rounds land in one window).
    const dispersion = (slots: { atMs: number }[]): { mean: number; vmr: number } => {
      const counts = new Array<number>(dur / 20_000).fill(0);
      for (const s of slots) counts[Math.min(counts.length - 1, Math.floor(s.atMs / 20_000))]!++;
      const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
      const v = counts.reduce((a, b) => a + (b - mean) ** 2, 0) / counts.length;
      return { mean, vmr: v / mean };
    };
    const dg = dispersion(g);
    const dp = dispersion(p);
    expect(dp.mean).toBeGreaterThan(9);
    expect(dp.mean).toBeLessThan(11);
    expect(dg.mean).toBeGreaterThan(8);
    expect(dg.mean).toBeLessThan(12);
    expect(dp.vmr).toBeLessThan(1.5); // Poisson: variance ≈ mean
    expect(dg.vmr).toBeGreaterThan(3 * dp.vmr);
  });

  it('arrivalSlots: Poisson gaps dealt to the workers in turn, or GuideLLM with random_seed = seed + trial', () => {
    const base = { ratePerS: 0.4, durationMs: 100_000, seed: 42, workload: 'multiturn' };
    const p = arrivalSlots({ ...base, process: 'poisson', clientWorkers: 3, trial: 2 });
    const plain = poissonSlots(0.4, 100_000, Rng.derive(42, 2, 'arrivals', 'multiturn'));
    expect(p.map((s) => s.atMs)).toEqual(plain.map((s) => s.atMs));
    expect(p.slice(0, 7).map((s) => s.worker)).toEqual([0, 1, 2, 0, 1, 2, 0]);
    expect(arrivalSlots({ ...base, process: 'guidellm', clientWorkers: 10, trial: 1 })).toEqual(
      guidellmPoissonSlots({ ratePerS: 0.4, durationMs: 100_000, workers: 10, seed: 43 }),
    );
    expect(() => arrivalSlots({ ...base, process: 'poisson', clientWorkers: 0, trial: 0 })).toThrow(
      /client workers/,
    );
  });
});

describe('the client shape on the command line', () => {
  it('sets arrivals and client workers, and rejects bad values', () => {
    const { schedule } = scheduleFromArgs(SEED_SCHEDULE, ['--client-workers', '4', '--arrivals', 'guidellm']);
    expect(latencyProfile(schedule, 'multiturn')).toMatchObject({
      kind: 'poisson',
      arrivals: 'guidellm',
      clientWorkers: 4,
    });
    expect(profileLabel(latencyProfile(schedule, 'multiturn'))).toBe(
      `guidellm-poisson@${SEED_SCHEDULE.poissonRate.multiturn}/s`,
    );
    expect(profileLabel(latencyProfile(SEED_SCHEDULE, 'multiturn'))).toBe(
      `poisson@${SEED_SCHEDULE.poissonRate.multiturn}/s`,
    );
    expect(latencyProfile(SEED_SCHEDULE, 'multiturn')).toMatchObject({
      arrivals: 'poisson',
      clientWorkers: 10,
    });
    for (const bad of ['0', '2.5', 'ten'])
      expect(() => scheduleFromArgs(SEED_SCHEDULE, ['--client-workers', bad])).toThrow(/client-workers/);
    expect(() => scheduleFromArgs(SEED_SCHEDULE, ['--arrivals', 'burst'])).toThrow(/arrivals/);
    expect(() => scheduleFromArgs(SEED_SCHEDULE, ['--random-routing', 'sticky'])).toThrow(/random-routing/);
  });
});
