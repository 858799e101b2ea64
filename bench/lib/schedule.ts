// BenchSchedule: everything that defines a run (arms, workloads, profiles, trials); the seed and smoke ones.
import type { FleetSpec } from './des/cell-setup.js';
import type { ArmName, ArrivalProcess, Profile, RandomRouting, WorkloadName } from './types.js';
import { ARM_NAMES, GUIDELLM_WORKERS, WORKLOAD_NAMES } from './types.js';
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
  /** Open-loop arrival times (default `poisson`; `guidellm` = GuideLLM's own schedule, workload/arrivals.ts). */
  arrivals?: ArrivalProcess;
  /** Client worker processes, as GuideLLM runs them (default 10): conversations and connection pools are per worker. */
  clientWorkers?: number;
  /**
   * The random arm: a random pod per keep-alive connection, as kube-proxy does behind GuideLLM's httpx pools
   * (default; arms/kube-proxy.ts), or per request.
   */
  randomRouting?: RandomRouting;
  /**
   * Calibrate the router's per-pod prefill cost from the pods' /metrics with the collector's estimator, as a
   * live deployment does (bench:live's twin); default off: the emulator profile's defaults.
   */
  collectorCalibration?: boolean;
  latencyWindows: { warmupS: number; measureS: number; cooldownS: number };
  concurrency: number[];
  capacityWindows: { warmupS: number; measureS: number; cooldownS: number };
  bootstrapResamples: number;
  /** SLO: TTFT ≤ idle uncached TTFT of the workload's mean prompt × (1 + padding); ITL ≤ itlMs. */
  slo: { ttftPadding: number; itlMs: number };
  emulatorProfile: string;
  kvCapacityTokens: number;
  /** vLLM's long_prefill_token_threshold on every pod (absent or 0: none, vLLM's default). */
  longPrefillTokenThreshold?: number;
  pods: number;
  latency: FleetSpec['latency'];
}

/** The open-loop latency profile of a workload. */
export function latencyProfile(s: BenchSchedule, w: WorkloadName): Profile {
  return {
    kind: 'poisson',
    rate: s.poissonRate[w],
    ...s.latencyWindows,
    arrivals: s.arrivals ?? 'poisson',
    clientWorkers: s.clientWorkers ?? GUIDELLM_WORKERS,
  };
}

/** The closed-loop capacity profile at `streams` concurrent streams. */
export function capacityProfile(s: BenchSchedule, streams: number): Profile {
  return {
    kind: 'concurrent',
    streams,
    ...s.capacityWindows,
    clientWorkers: s.clientWorkers ?? GUIDELLM_WORKERS,
  };
}

export function profilesOf(s: BenchSchedule, w: WorkloadName): Profile[] {
  const out: Profile[] = [];
  if (s.poissonRate[w] > 0) out.push(latencyProfile(s, w));
  for (const n of s.concurrency) out.push(capacityProfile(s, n));
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

/** The published study's schedule (docs/benchmark.md "What is measured"), with this repo's calibration. */
export const SEED_SCHEDULE: BenchSchedule = {
  name: 'seed',
  seed: 42,
  trials: 3,
  arms: [...ARM_NAMES],
  workloads: [...WORKLOAD_NAMES],
  shapes: PUBLISHED_SHAPES,
  poissonRate: { control: 0.2, 'shared-prefix': 0.27, multiturn: 0.52 },
  arrivals: 'poisson',
  clientWorkers: GUIDELLM_WORKERS,
  randomRouting: 'per-connection',
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

/** Tiny schedule for CI: one trial, five arms, short windows, one concurrency level. */
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
