import { parseArgs } from 'node:util';
import { getProfile, PROFILES } from '../../emulator/profiles.js';
import type { BenchSchedule } from './schedule.js';
import { ARM_NAMES, WORKLOAD_NAMES, type ArmName, type WorkloadName } from './types.js';

/** Options every benchmark command takes for the fleet, the rates and the client (parseArgs specs). */
export const CLIENT_ARG_OPTIONS = {
  'emulator-profile': { type: 'string' },
  'kv-capacity': { type: 'string' },
  rates: { type: 'string' },
  'client-workers': { type: 'string' },
  arrivals: { type: 'string' },
  'random-routing': { type: 'string' },
} as const;

/** Applies `CLIENT_ARG_OPTIONS` values to a schedule (in place), rejecting what they cannot be. */
export function applyClientArgs(
  s: BenchSchedule,
  values: Partial<Record<keyof typeof CLIENT_ARG_OPTIONS, string>>,
): void {
  if (values['emulator-profile']) {
    const p = getProfile(values['emulator-profile']);
    if (!p)
      throw new Error(
        `--emulator-profile ${values['emulator-profile']}: one of ${Object.keys(PROFILES).join(', ')}`,
      );
    // Another GPU: its profile's own KV cache, unless --kv-capacity says otherwise.
    if (p.name !== s.emulatorProfile) s.kvCapacityTokens = p.kvCapacityTokens;
    s.emulatorProfile = p.name;
  }
  if (values['kv-capacity']) s.kvCapacityTokens = Number(values['kv-capacity']);
  if (values.rates) {
    // control=0.15,shared-prefix=0.2,multiturn=0.5
    for (const kv of values.rates.split(',')) {
      const [w, r] = kv.split('=') as [WorkloadName, string];
      s.poissonRate[w] = Number(r);
    }
  }
  if (values['client-workers']) {
    s.clientWorkers = Number(values['client-workers']);
    if (!Number.isInteger(s.clientWorkers) || s.clientWorkers < 1)
      throw new Error(`--client-workers ${values['client-workers']}: a whole number ≥ 1`);
  }
  if (values.arrivals) {
    if (values.arrivals !== 'poisson' && values.arrivals !== 'guidellm')
      throw new Error(`--arrivals ${values.arrivals}: poisson or guidellm`);
    s.arrivals = values.arrivals;
  }
  if (values['random-routing']) {
    const r = values['random-routing'];
    if (r !== 'per-request' && r !== 'per-connection')
      throw new Error(`--random-routing ${r}: per-request or per-connection`);
    s.randomRouting = r;
  }
}

/** Overrides of a schedule from the command line (every piece runnable alone, smaller or larger). */
export function scheduleFromArgs(
  base: BenchSchedule,
  argv: string[],
): { schedule: BenchSchedule; workers: number } {
  const { values } = parseArgs({
    args: argv,
    options: {
      name: { type: 'string' },
      trials: { type: 'string' },
      arms: { type: 'string' },
      workloads: { type: 'string' },
      concurrency: { type: 'string' },
      ...CLIENT_ARG_OPTIONS,
      seed: { type: 'string' },
      workers: { type: 'string' },
      'measure-s': { type: 'string' },
    },
    strict: true,
  });
  const s: BenchSchedule = structuredClone(base);
  if (values.name) s.name = values.name;
  if (values.trials) s.trials = Number(values.trials);
  if (values.seed) s.seed = Number(values.seed);
  if (values.arms) {
    s.arms = values.arms.split(',') as ArmName[];
    for (const a of s.arms)
      if (!ARM_NAMES.includes(a)) throw new Error(`unknown arm ${a} (${ARM_NAMES.join(', ')})`);
  }
  if (values.workloads) {
    s.workloads = values.workloads.split(',') as WorkloadName[];
    for (const w of s.workloads) if (!WORKLOAD_NAMES.includes(w)) throw new Error(`unknown workload ${w}`);
  }
  if (values.concurrency !== undefined)
    s.concurrency = values.concurrency ? values.concurrency.split(',').map(Number) : [];
  applyClientArgs(s, values);
  if (values['measure-s']) {
    const m = Number(values['measure-s']);
    s.latencyWindows.measureS = m;
    s.capacityWindows.measureS = m;
  }
  return { schedule: s, workers: values.workers !== undefined ? Number(values.workers) : 2 };
}
