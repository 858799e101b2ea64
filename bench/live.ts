/**
 * `npm run bench:live`: the same cell run twice — in virtual time (DES) and against real processes (Redis,
 * `kinference emulator` pods time-scaled, `kinference collector`, `kinference gateway` with the plugin in the
 * real kong-js-pluginserver) — for the given arms (random, kinference, kinference-slo), Poisson or N concurrent
 * streams, to show the two modes agree within noise. `--one-stack` runs the arms one after another on one
 * stack, as a gateway that stays up would, to show what state carried from arm to arm does.
 * Writes bench/results/live.{json,md}.
 */
import { USAGE, values } from './lib/usage/live.js'; // first: --help before the heavy imports
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fleetOf } from './lib/des/fleet.js';
import { runSpec } from './lib/des/worker.js';
import { probePaths, type PathFit } from './lib/live/path-probe.js';
import { compareModes, type ArmAgreement } from './lib/live/agreement.js';
import { runLiveCell, type LiveArm } from './lib/live/run-live-cell.js';
import { resetPrefixCaches, startLiveStack, type LiveStack } from './lib/live/stack.js';
import { scheduleStack, warmGateways } from './lib/live/warm-gateways.js';
import { applyClientArgs } from './lib/cli-args.js';
import { numberArg, orUsage, UsageError } from './lib/cli.js';
import { capacityProfile, latencyProfile, SEED_SCHEDULE, type BenchSchedule } from './lib/schedule.js';
import { loadModelSetup } from './lib/setup.js';
import { sloFor } from './lib/slo.js';
import { goodputPerMin } from './lib/stats/goodput.js';
import { erroredInWindow } from './lib/stats/metrics.js';
import { WORKLOAD_NAMES, type Profile, type RequestRecord, type WorkloadName } from './lib/types.js';
import { WorkloadFactory } from './lib/workload/workloads.js';
import { compactRecord, type CompactRecord } from './lib/live/compact-record.js';

const s: BenchSchedule = structuredClone(SEED_SCHEDULE);
const { workload, timeScale, trial, streams, windows, arms, REPLICATES } = orUsage(
  'bench:live',
  USAGE,
  () => {
    if (!WORKLOAD_NAMES.includes(values.workload as WorkloadName))
      throw new UsageError(`--workload ${values.workload}: one of ${WORKLOAD_NAMES.join(', ')}`);
    const workload = values.workload as WorkloadName;
    applyClientArgs(s, values);
    if (values.rate !== undefined) s.poissonRate[workload] = numberArg('rate', values.rate, 'positive');
    const arms = values.arms.split(',') as LiveArm[];
    for (const a of arms)
      if (!['random', 'kinference', 'kinference-slo'].includes(a))
        throw new UsageError(`--arms: unknown live arm ${a} (random, kinference, kinference-slo)`);
    if (!['measured', 'seed'].includes(values['des-path']))
      throw new UsageError(`--des-path ${values['des-path']}: measured or seed`);
    const timeScale = numberArg('time-scale', values['time-scale'], 'positive');
    // Its SLO is in real milliseconds and Retry-After in whole real seconds: only real time keeps them true.
    if (arms.includes('kinference-slo') && timeScale !== 1)
      throw new UsageError(`--arms kinference-slo needs --time-scale 1 (got ${timeScale})`);
    return {
      workload,
      timeScale,
      trial: numberArg('trial', values.trial, 'whole ≥ 0'),
      streams: values.concurrency ? numberArg('concurrency', values.concurrency, 'whole ≥ 1') : null,
      windows: {
        warmupS: 60,
        measureS: numberArg('measure-s', values['measure-s'], 'positive'),
        cooldownS: 20,
      },
      arms,
      REPLICATES: numberArg('replicates', values.replicates, 'whole ≥ 0'),
    };
  },
);
const randomRouting = s.randomRouting;
const profile: Profile = {
  ...(streams !== null ? capacityProfile(s, streams) : latencyProfile(s, workload)),
  ...windows,
};
const command = `npm run bench:live -- ${process.argv.slice(2).join(' ')}`.trim();
const model = await loadModelSetup();
const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));
const slo = sloFor(s, model)[workload];

const results: ArmAgreement[] = [];
const wall: Record<string, { des: number; live: number }> = {};
/**
 * Every arm runs on a fresh stack, as every DES cell starts on fresh pods, index and router: a stack carries
 * state from one arm to the next that its twin cannot know (the collector's calibration window, the
 * plugin's reservations and corrections), and one early choice made on it changes the rest of the cell.
 */
const startStack = () =>
  startLiveStack({
    ...scheduleStack(s, { timeScale, model, cli }),
    ...(arms.includes('kinference-slo')
      ? { admission: { itl_slo_ms: slo.itlMs, shed_ttft_slo_ms: slo.ttftMs } }
      : {}),
  });
/** Goodput (requests/min within the SLO) and the gateway's 429s started in the measure window. */
const rates = (c: { records: RequestRecord[]; windowStartMs: number; windowEndMs: number }) => ({
  goodput: goodputPerMin(c.records, slo, c.windowStartMs, c.windowEndMs),
  shed: erroredInWindow(c.records, c.windowStartMs, c.windowEndMs).filter((r) => r.pod === '').length,
});
const extra: Record<string, { des: ReturnType<typeof rates>; live: ReturnType<typeof rates> }> = {};
/** Every request of both modes, to diff them one by one (bench/debug/live-diff.ts). */
const requests: Record<string, { des: CompactRecord[]; live: CompactRecord[] }> = {};
/** Each arm's path latency (pod direct for random, through the gateway otherwise), probed on its idle stack. */
const paths: Partial<Record<LiveArm, PathFit>> = {};
const PROBE_REPEATS = 11;
/** The twin's replicates: each request's path jittered by a uniform [0, JITTER_MS) (the probes' spread). */
const JITTER_MS = 5;
/** The DES the live arm is compared with: the seed's fixed path, or the path this stack measured. */
const desSchedule = (arm: LiveArm): BenchSchedule => {
  const fit = paths[arm];
  // The live collector calibrates each pod from its /metrics; so does the twin.
  const base = { ...s, collectorCalibration: true };
  if (!fit) return base;
  const { requestOverheadMs, requestOverheadMsPerToken, requestOverheadMsPerTokenizedToken } = fit;
  return {
    ...base,
    latency: {
      ...s.latency,
      requestOverheadMs,
      requestOverheadMsPerToken,
      requestOverheadMsPerTokenizedToken,
    },
  };
};
const oneStack = values['one-stack'];
/** The stack running now: stopped on Ctrl-C or SIGTERM too, so no process outlives the run. */
let current: LiveStack | null = null;
const stopCurrent = async (): Promise<void> => {
  const stack = current;
  current = null;
  await stack?.stop();
};
const stopOnSignal = (): void => {
  void stopCurrent().finally(() => process.exit(130));
};
process.once('SIGINT', stopOnSignal);
process.once('SIGTERM', stopOnSignal);
for (const arm of arms) {
  const stack: LiveStack = oneStack && current ? current : await startStack();
  current = stack;
  try {
    if (arm !== 'random')
      // The plugin loads its tokenizer on its first request: one short request does it before the cell.
      await warmGateways(stack, model, {
        strict: true,
        ...(arm === 'kinference-slo' && stack.sloPath ? { path: stack.sloPath } : {}),
      });
    if (values['des-path'] === 'measured') {
      // Measured on the arm's own stack just before its cell (the same processes the cell runs through).
      const route = arm === 'random' ? 'direct' : 'gateway';
      const fits = await probePaths({
        targets: { [route]: arm === 'random' ? stack.pods[0]! : stack.gateway },
        pod: fleetOf(s, model).pod,
        model,
        timeScale,
        responseOverheadMs: s.latency.responseOverheadMs,
        repeats: PROBE_REPEATS,
        ...(route === 'gateway'
          ? { tokenizing: { routes: [route], resetPrefixCaches: () => resetPrefixCaches(stack) } }
          : {}),
      });
      paths[arm] = fits[route];
      console.error(`path ${arm}: ${JSON.stringify(paths[arm])}`);
    }
    // The probes ran solo prefills that the collector keeps as the pods' own cost; the twin has none.
    if (!oneStack) await stack.restartCollector();
    await resetPrefixCaches(stack);
    console.error(
      `live: ${workload} ${arm} (${((profile.warmupS + profile.measureS + profile.cooldownS) / timeScale) | 0} s)…`,
    );
    const live = await runLiveCell({
      arm,
      stack,
      factory: new WorkloadFactory(workload, s.shapes, model.synth, s.seed, trial),
      profile,
      timeScale,
      model,
      seed: s.seed,
      trial,
      ...(randomRouting ? { randomRouting } : {}),
    });
    console.error(`des: ${workload} ${arm}…`);
    const spec = { id: 0, workload, profile, arm, trial };
    const twin = desSchedule(arm);
    const des = await runSpec(twin, model, spec);
    const replicates = [];
    for (let k = 1; k <= REPLICATES; k++) {
      const jitter = { maxMs: JITTER_MS, stream: k };
      replicates.push(await runSpec({ ...twin, latency: { ...twin.latency, jitter } }, model, spec));
    }
    results.push(compareModes(arm, des, live, s.bootstrapResamples, s.seed, replicates));
    extra[arm] = { des: rates(des), live: rates(live) };
    requests[arm] = { des: des.records.map(compactRecord), live: live.records.map(compactRecord) };
    wall[arm] = { des: des.wallMs, live: live.wallMs };
  } catch (err) {
    await stopCurrent();
    throw err;
  }
  if (!oneStack || arm === arms[arms.length - 1]) await stopCurrent();
}
process.removeListener('SIGINT', stopOnSignal);
process.removeListener('SIGTERM', stopOnSignal);

const f = (ms: number): string => (ms / 1000).toFixed(2);
const pct = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)}%`;
const L = [
  '# Kinference benchmark: live vs discrete-event agreement',
  '',
  `Command: \`${command}\`  `,
  `Cell: ${workload}, ${profile.kind === 'poisson' ? `Poisson ${profile.rate}/s` : `${profile.streams} concurrent streams`} (virtual), windows ${profile.warmupS}/${profile.measureS}/${profile.cooldownS} s, seed ${s.seed}, trial ${trial}. ` +
    `Live: Redis + ${s.pods} \`kinference emulator\` pods at time_scale ${timeScale} + \`kinference collector\` + \`kinference gateway\` (plugin in kong-js-pluginserver), ${oneStack ? 'one stack for all arms, in the order listed (only prefix caches reset between arms)' : 'a fresh stack for each arm'}; ` +
    `client timestamps × ${timeScale}. random = client sends to the pod kube-proxy would pick (${s.randomRouting ?? 'per-request'}, as the DES arm); kinference = through the gateway; ` +
    `kinference-slo = the gateway's route with admission control (itl_slo_ms ${slo.itlMs}, shed_ttft_slo_ms ${slo.ttftMs}).`,
  '',
  `DES path latency (client → engine → client, virtual ms): ${
    values['des-path'] === 'seed'
      ? `the seed schedule's ${s.latency.requestOverheadMs} + ${s.latency.requestOverheadMsPerToken}/token + ${s.latency.responseOverheadMs}`
      : arms
          .filter((k) => paths[k])
          .map(
            (k) =>
              `${k === 'random' ? 'random (pod direct)' : `${k} (through the gateway)`} ${paths[k]!.requestOverheadMs.toFixed(1)} + ${paths[k]!.requestOverheadMsPerToken.toFixed(4)}/token${paths[k]!.requestOverheadMsPerTokenizedToken > 0 ? ` + ${paths[k]!.requestOverheadMsPerTokenizedToken.toFixed(4)}/token the plugin tokenized (not from its segment cache)` : ''} + ${s.latency.responseOverheadMs}, measured on the arm's stack before its cell (idle, uncached probes, medians of ${PROBE_REPEATS}: ${paths[k]!.samples.map((x) => `${x.promptTokens} tokens ${x.overheadMs.toFixed(1)} ms${x.warmOverheadMs !== undefined ? ` (${x.warmOverheadMs.toFixed(1)} ms with the plugin's segment cache warm)` : ''}`).join(', ')})`,
          )
          .join('; ')
  } (the seed schedule charges ${s.latency.requestOverheadMs} + ${s.latency.requestOverheadMsPerToken}/token + ${s.latency.responseOverheadMs} for every arm).`,
  '',
  `Agreement (the last column): the request-level bootstrap 95% CI of live vs the twin covers 0 for that statistic; it resamples the requests of one realization. The cell agrees when the TTFT median and p95 do; where TTFT is bimodal (cache hits vs full prefills) the median can sit in either mode, and the mean, which weighs both, is the statistic to read. ${REPLICATES > 0 ? `DES realizations: the twin's range over itself and ${REPLICATES} replicates with each request's path delayed by a uniform 0–${JITTER_MS} ms (how far the cell moves with the path's timing).` : ''}`,
  '',
  '| arm | metric | DES | DES realizations | live | live vs DES | 95% CI | agree |',
  '|---|---|---|---|---|---|---|---|',
];
for (const r of results) {
  for (const q of ['median', 'p95', 'mean'] as const)
    L.push(
      `| ${r.arm} | TTFT ${q} (s) | ${f(r.ttft[q].baseline)} | ${r.realizations ? `${f(r.realizations[q][0])}–${f(r.realizations[q][1])}` : ''} | ${f(r.ttft[q].treatment)} | ${pct(r.ttft[q].change)} | [${pct(r.ttft[q].ci95[0])}, ${pct(r.ttft[q].ci95[1])}] | ${r.agreeOn[q] ? 'yes' : '**no**'} |`,
    );
  L.push(
    `| ${r.arm} | ITL median (ms) | ${r.des.itl_ms.median.toFixed(1)} | | ${r.live.itl_ms.median.toFixed(1)} | | | |`,
  );
  L.push(`| ${r.arm} | requests in window | ${r.desN} | | ${r.liveN} | | | |`);
  const x = extra[r.arm]!;
  L.push(
    `| ${r.arm} | goodput (req/min within the SLO) | ${x.des.goodput.toFixed(1)} | | ${x.live.goodput.toFixed(1)} | | | |`,
  );
  L.push(`| ${r.arm} | 429s in window | ${x.des.shed} | | ${x.live.shed} | | | |`);
}
const byArm = (a: string): ArmAgreement | undefined => results.find((r) => r.arm === a);
const kr = byArm('kinference');
const rr = byArm('random');
if (kr && rr) {
  L.push('', 'kinference vs random, median TTFT:');
  L.push(
    `- DES: ${pct(kr.des.ttft_ms.median / rr.des.ttft_ms.median - 1)}; live: ${pct(kr.live.ttft_ms.median / rr.live.ttft_ms.median - 1)}`,
  );
}
const md = L.join('\n');
mkdirSync('bench/results', { recursive: true });
writeFileSync(`bench/results/${values.name}.md`, md + '\n');
writeFileSync(
  `bench/results/${values.name}.json`,
  JSON.stringify(
    {
      meta: {
        command,
        date: new Date().toISOString(),
        timeScale,
        workload,
        profile,
        trial,
        wall,
        slo,
        paths,
      },
      results,
      rates: extra,
      requests,
    },
    null,
    1,
  ) + '\n',
);
console.log(md);
