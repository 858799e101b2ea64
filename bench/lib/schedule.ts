import type { FleetSpec } from './des/cell-setup.js';
import type { ArmName, Profile, WorkloadName } from './types.js';
import { ARM_NAMES, WORKLOAD_NAMES } from './types.js';
import type { WorkloadShapes } from './workload/workloads.js';
import { PUBLISHED_SHAPES } from './workload/workloads.js';

/** Everything that defines a benchmark run; written into the results so a run can be reproduced. */
export interface BenchSchedule {
  name: string;
  seed: number;
  trials: number;
  arms: ArmName[];
  workloads: WorkloadName[];
  shapes: WorkloadShapes;
  /** Poisson rate per workload (requests/s) for the latency profile. */
  poissonRate: Record<WorkloadName, number>;
  /**
   * How the open-loop arrivals are drawn: 1 = a plain Poisson process; N > 1 = GuideLLM's `poisson`
   * strategy as it actually runs with N worker processes (GuideLLM's default is 10; workload/arrivals.ts).
   * Optional so that results written before it read as 1.
   */
  clientWorkers?: number;
  latencyWindows: { warmupS: number; measureS: number; cooldownS: number };
  concurrency: number[];
  capacityWindows: { warmupS: number; measureS: number; cooldownS: number };
  bootstrapResamples: number;
  /** SLO: TTFT ≤ idle uncached TTFT of the workload's mean prompt × (1 + padding); ITL ≤ itlMs. */
  slo: { ttftPadding: number; itlMs: number };
  emulatorProfile: string;
  kvCapacityTokens: number;
  pods: number;
  latency: FleetSpec['latency'];
}

/** The open-loop latency profile of a workload. */
export function latencyProfile(s: BenchSchedule, w: WorkloadName): Profile {
  return {
    kind: 'poisson',
    rate: s.poissonRate[w],
    ...s.latencyWindows,
    clientWorkers: s.clientWorkers ?? 1,
  };
}

export function profilesOf(s: BenchSchedule, w: WorkloadName): Profile[] {
  const out: Profile[] = [];
  if (s.poissonRate[w] > 0) out.push(latencyProfile(s, w));
  for (const n of s.concurrency) out.push({ kind: 'concurrent', streams: n, ...s.capacityWindows });
  return out;
}

const PATH_LATENCY: FleetSpec['latency'] = {
  // Gateway + plugin + vLLM API server (BLIS α0 ≈ 15.6 ms) + tokenizing ~1 µs/token.
  requestOverheadMs: 20,
  requestOverheadMsPerToken: 0.001,
  responseOverheadMs: 1,
  kvEventDelayMs: 10,
  scrapeIntervalMs: 1000,
};

/** The published study's schedule (DESIGN.md, bench.md §1.3–1.5), with this repo's calibration. */
export const SEED_SCHEDULE: BenchSchedule = {
  name: 'seed',
  seed: 42,
  trials: 3,
  arms: [...ARM_NAMES],
  workloads: [...WORKLOAD_NAMES],
  shapes: PUBLISHED_SHAPES,
  poissonRate: { control: 0.2, 'shared-prefix': 0.25, multiturn: 0.5 },
  clientWorkers: 1,
  latencyWindows: { warmupS: 60, measureS: 240, cooldownS: 45 },
  concurrency: [4, 8, 16, 24, 32],
  capacityWindows: { warmupS: 60, measureS: 180, cooldownS: 60 },
  bootstrapResamples: 2000,
  slo: { ttftPadding: 0.25, itlMs: 100 },
  emulatorProfile: 'l40s-27b-fp8',
  kvCapacityTokens: 94_208,
  pods: 3,
  latency: PATH_LATENCY,
};

/** Tiny schedule for CI: one trial, four arms, short windows, one concurrency level. */
export const SMOKE_SCHEDULE: BenchSchedule = {
  ...SEED_SCHEDULE,
  name: 'smoke',
  trials: 1,
  arms: ['random', 'least-connections', 'kinference', 'kinference-slo', 'oracle'],
  workloads: ['shared-prefix', 'multiturn'],
  poissonRate: { control: 0.3, 'shared-prefix': 0.3, multiturn: 0.5 },
  latencyWindows: { warmupS: 10, measureS: 40, cooldownS: 5 },
  concurrency: [8],
  capacityWindows: { warmupS: 10, measureS: 30, cooldownS: 5 },
  bootstrapResamples: 200,
};
