// Command-line options every benchmark command takes (fleet, rates, client), applied to a schedule.
import { getProfile, PROFILES } from '../../emulator/profiles.js';
import { benchArgs, numberArg, UsageError } from './cli.js';
import type { BenchSchedule } from './schedule.js';
import { ARM_NAMES, WORKLOAD_NAMES, type ArmName, type WorkloadName } from './types.js';

/** Options every benchmark command takes for the fleet, the rates and the client (parseArgs specs). */
export const CLIENT_ARG_OPTIONS = {
  'emulator-profile': { type: 'string' },
  'kv-capacity': { type: 'string' },
  'long-prefill-threshold': { type: 'string' },
  rates: { type: 'string' },
  'client-workers': { type: 'string' },
  arrivals: { type: 'string' },
  'random-routing': { type: 'string' },
} as const;

/** Usage lines of `CLIENT_ARG_OPTIONS`, defaults from the schedule they apply to. */
export function clientArgsUsage(s: BenchSchedule): string {
  return `  --emulator-profile P   the pods' GPU: ${Object.keys(PROFILES).join(' or ')} (default ${s.emulatorProfile})
  --kv-capacity T        KV cache per pod, tokens (default ${s.kvCapacityTokens}; another profile brings its own)
  --long-prefill-threshold N  the pods' vLLM long_prefill_token_threshold (default ${s.longPrefillTokenThreshold ?? 0}: none)
  --rates w=r,...        Poisson rate per workload, requests/s (default ${Object.entries(s.poissonRate)
    .map(([w, r]) => `${w}=${r}`)
    .join(',')})
  --client-workers N     client worker processes, as GuideLLM runs them (default ${s.clientWorkers ?? 10})
  --arrivals A           poisson (default) or guidellm (GuideLLM's own schedule)
  --random-routing R     the random arm: per-connection (kube-proxy, default) or per-request`;
}

/** Applies `CLIENT_ARG_OPTIONS` values to a schedule (in place), rejecting what they cannot be. */
export function applyClientArgs(
  s: BenchSchedule,
  values: Partial<Record<keyof typeof CLIENT_ARG_OPTIONS, string>>,
): void {
  if (values['emulator-profile']) {
    const p = getProfile(values['emulator-profile']);
    if (!p)
      throw new UsageError(
        `--emulator-profile ${values['emulator-profile']}: one of ${Object.keys(PROFILES).join(', ')}`,
      );
    // Another GPU: its profile's own KV cache, unless --kv-capacity says otherwise.
    if (p.name !== s.emulatorProfile) s.kvCapacityTokens = p.kvCapacityTokens;
    s.emulatorProfile = p.name;
  }
  if (values['kv-capacity'] !== undefined)
    s.kvCapacityTokens = numberArg('kv-capacity', values['kv-capacity'], 'whole ≥ 1');
  if (values['long-prefill-threshold'] !== undefined)
    s.longPrefillTokenThreshold = numberArg(
      'long-prefill-threshold',
      values['long-prefill-threshold'],
      'whole ≥ 0',
    );
  if (values.rates !== undefined) {
    // control=0.15,shared-prefix=0.2,multiturn=0.5 (0 leaves a workload's Poisson cell out)
    for (const kv of values.rates.split(',')) {
      const [w, r] = kv.split('=') as [WorkloadName, string | undefined];
      if (!WORKLOAD_NAMES.includes(w) || r === undefined)
        throw new UsageError(
          `--rates ${values.rates}: workload=rate,... with workloads ${WORKLOAD_NAMES.join(', ')}`,
        );
      const rate = Number(r);
      if (r.trim() === '' || !(rate >= 0 && Number.isFinite(rate)))
        throw new UsageError(`--rates ${kv}: expected a rate ≥ 0 requests/s (0 leaves the Poisson cell out)`);
      s.poissonRate[w] = rate;
    }
  }
  if (values['client-workers'] !== undefined)
    s.clientWorkers = numberArg('client-workers', values['client-workers'], 'whole ≥ 1');
  if (values.arrivals) {
    if (values.arrivals !== 'poisson' && values.arrivals !== 'guidellm')
      throw new UsageError(`--arrivals ${values.arrivals}: poisson or guidellm`);
    s.arrivals = values.arrivals;
  }
  if (values['random-routing']) {
    const r = values['random-routing'];
    if (r !== 'per-request' && r !== 'per-connection')
      throw new UsageError(`--random-routing ${r}: per-request or per-connection`);
    s.randomRouting = r;
  }
}

/** The usage of `bench:seed` / `bench:des` over `base`. */
export function scheduleUsage(script: string, base: BenchSchedule): string {
  return `npm run ${script} [-- options]: the discrete-event benchmark (virtual time: the real router core and
index, the emulator's engine); writes bench/results/<name>.{json,md} and charts

  --name NAME            results file name (default ${base.name})
  --trials N             trials, fresh prompts each (default ${base.trials})
  --seed N               prompts and arrivals (default ${base.seed})
  --arms a,b,...         of ${ARM_NAMES.join(', ')} (default all)
  --workloads w,...      of ${WORKLOAD_NAMES.join(', ')} (default all)
  --concurrency N,...    closed-loop stream counts (default ${base.concurrency.join(',')}; '' for none)
  --measure-s S          the measurement window of both profiles (default ${base.latencyWindows.measureS} / ${base.capacityWindows.measureS})
  --workers N            processes running cells in parallel (default 2)
${clientArgsUsage(base)}`;
}

/** Overrides of a schedule from the command line (every piece runnable alone, smaller or larger). */
export function scheduleFromArgs(
  base: BenchSchedule,
  argv: string[],
  script = 'bench:des',
): { schedule: BenchSchedule; workers: number } {
  const values = benchArgs(
    script,
    scheduleUsage(script, base),
    {
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
    argv,
  );
  const s: BenchSchedule = structuredClone(base);
  if (values.name) s.name = values.name;
  if (values.trials !== undefined) s.trials = numberArg('trials', values.trials, 'whole ≥ 1');
  if (values.seed !== undefined) s.seed = numberArg('seed', values.seed, 'whole ≥ 0');
  if (values.arms) {
    s.arms = values.arms.split(',') as ArmName[];
    for (const a of s.arms)
      if (!ARM_NAMES.includes(a)) throw new UsageError(`unknown arm ${a} (${ARM_NAMES.join(', ')})`);
  }
  if (values.workloads) {
    s.workloads = values.workloads.split(',') as WorkloadName[];
    for (const w of s.workloads)
      if (!WORKLOAD_NAMES.includes(w))
        throw new UsageError(`unknown workload ${w} (${WORKLOAD_NAMES.join(', ')})`);
  }
  if (values.concurrency !== undefined)
    s.concurrency = values.concurrency
      ? values.concurrency.split(',').map((n) => numberArg('concurrency', n, 'whole ≥ 1'))
      : [];
  applyClientArgs(s, values);
  if (values['measure-s'] !== undefined) {
    const m = numberArg('measure-s', values['measure-s'], 'positive');
    s.latencyWindows.measureS = m;
    s.capacityWindows.measureS = m;
  }
  const workers = values.workers !== undefined ? numberArg('workers', values.workers, 'whole ≥ 1') : 2;
  return { schedule: s, workers };
}
