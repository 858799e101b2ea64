/**
 * `npm run bench:mixed-live -- [--arms a,b] [--no-solo] [--limit-nodes N] [--name out]`: the mixed-tenant
 * benchmark (issue #31 item 6) through the live stack at time scale 1: the DES scenario's three tenants, as
 * Kong consumers (key-auth), through the Kong stand-in and the plugin to emulated pods, one fresh stack per
 * arm; then the limited tenant alone across N gateway nodes on one Redis. The offered load and the batch's
 * "capacity left" are the DES run's (bench/results/mixed-tenants.json); the chat's solo runs are live.
 * Writes bench/results/<name>.{json,md} (default mixed-tenants-live), the DES figures beside the live ones.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { benchArgs, numberArg, orUsage } from './lib/cli.js';
import type { ArmRow, MixedReport } from './lib/mixed/mixed-bench.js';
import {
  acceptedPerUtcMinute,
  LIVE_PLUGIN_SETTINGS,
  runLiveMixedArm,
  type LiveMixedResult,
} from './lib/mixed/live-mixed.js';
import { liveMixedMarkdown, type LiveLimitRun, type LiveMixedReport } from './lib/mixed/live-report.js';
import { CHAT, FREE, MIXED_ARMS, NIGHTLY, type MixedArmName, type TenantLoad } from './lib/mixed/scenario.js';
import { tenantFigures, type TenantFigures } from './lib/mixed/tenant-metrics.js';
import { SEED_SCHEDULE } from './lib/schedule.js';
import { loadModelSetup } from './lib/setup.js';
import type { Slo } from './lib/stats/goodput.js';

const USAGE = `npm run bench:mixed-live -- [options]: the mixed-tenant scenario through the live stack (time scale 1),
one fresh stack per arm (${MIXED_ARMS.join(', ')}), then the limited tenant across N gateway nodes; the offered
load is bench/results/mixed-tenants.json's (run npm run bench:mixed first). Writes bench/results/<name>.{json,md}

  --arms a,b         a subset of the arms (default all)
  --warmup S         warm-up seconds (default the DES run's)
  --measure S        measure window, seconds (default the DES run's; whole minutes count the limit)
  --no-solo          skip the chat's solo runs (goodput vs solo then reads 0)
  --limit-nodes N    gateway nodes of the limit run (default 4; 0 skips it)
  --limit-minutes M  whole minutes the limit run measures (default 3)
  --name NAME        output name (default mixed-tenants-live)`;

const values = benchArgs('bench:mixed-live', USAGE, {
  arms: { type: 'string', default: MIXED_ARMS.join(',') },
  warmup: { type: 'string' },
  measure: { type: 'string' },
  'no-solo': { type: 'boolean', default: false },
  'limit-nodes': { type: 'string', default: '4' },
  'limit-minutes': { type: 'string', default: '3' },
  name: { type: 'string', default: 'mixed-tenants-live' },
});
const limitNodes = orUsage('bench:mixed-live', USAGE, () =>
  numberArg('limit-nodes', values['limit-nodes']!, 'whole ≥ 0'),
);
const limitMinutes = orUsage('bench:mixed-live', USAGE, () =>
  numberArg('limit-minutes', values['limit-minutes']!, 'whole ≥ 1'),
);
const arms = values.arms!.split(',').filter(Boolean) as MixedArmName[];
for (const a of arms)
  if (!MIXED_ARMS.includes(a)) {
    console.error(`bench:mixed-live: --arms: unknown arm ${a}; expected some of ${MIXED_ARMS.join(', ')}`);
    process.exit(2);
  }

const des = JSON.parse(readFileSync('bench/results/mixed-tenants.json', 'utf8')) as MixedReport & {
  command: string;
};
const windows = orUsage('bench:mixed-live', USAGE, () => ({
  ...des.scenario.windows,
  ...(values.warmup !== undefined ? { warmupS: numberArg('warmup', values.warmup, 'whole ≥ 0') } : {}),
  ...(values.measure !== undefined ? { measureS: numberArg('measure', values.measure, 'whole ≥ 1') } : {}),
}));
const s = { ...des.scenario, windows, gateways: 1 };
const ref = des.reference;
const model = await loadModelSetup();
const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));
mkdirSync('.tmp', { recursive: true });
const childLog = `.tmp/${values.name}-children.log`;
writeFileSync(childLog, '');
const log = (l: string): void => console.log(l);
const slo: { chat: Slo; batch: Slo; free: Slo } = des.slo;
const loadAt = (): number[] => loadavg().map((x) => Math.round(x * 100) / 100);

const figures = (r: LiveMixedResult, tenant: string, t: Slo, measureS: number): TenantFigures => ({
  ...tenantFigures(r, tenant, t),
  acceptedPromptTokensPerMin: acceptedPerUtcMinute(
    r.records.filter((x) => x.tenant === tenant),
    r.measureStartEpochMs,
    measureS,
  ),
});
const run = (arm: MixedArmName, load: TenantLoad, scenario = s, gateways = 1): Promise<LiveMixedResult> =>
  runLiveMixedArm({
    arm,
    scenario,
    schedule: SEED_SCHEDULE,
    model,
    cli,
    load,
    requestLimits: ref.requestLimits,
    gateways,
    childLog,
    log,
  });
/** Every request of a run, for per-request reading afterwards (not committed). */
let runNo = 0;
const dumpRecords = (label: string, r: LiveMixedResult): void =>
  writeFileSync(`.tmp/${values.name}-${++runNo}-${label}.json`, JSON.stringify(r.records));
const runInfo = (r: LiveMixedResult) => ({
  measureStart: new Date(r.measureStartEpochMs).toISOString(),
  loadAvg: r.loadAvg,
  uncountedAdmissions: r.uncountedAdmissions,
  limiterPromptCounters: r.limiterPromptCounters,
  wallMs: Math.round(r.wallMs),
});

const startedAt = new Date().toISOString();
const loadAtStart = loadAt();
const chatSolo: Partial<Record<'random' | 'kinference', TenantFigures>> = {};
const soloInfo: Record<string, ReturnType<typeof runInfo>> = {};
// Only the solo runs the chosen arms are compared with (random's for the random arms, kinference's for the rest).
const families = (['random', 'kinference'] as const).filter((f) =>
  arms.some((a) => a.startsWith('random') === (f === 'random')),
);
if (!values['no-solo'])
  for (const family of families) {
    log(`solo chat, ${family}…`);
    const r = await run(family, { chat: s.chatRatePerS, nightly: null, free: null });
    dumpRecords(`solo-${family}`, r);
    chatSolo[family] = figures(r, CHAT, slo.chat, s.windows.measureS);
    soloInfo[family] = runInfo(r);
    log(`  p95 ${chatSolo[family].ttftP95Ms?.toFixed(0)} ms, goodput ${chatSolo[family].goodputPerMin}/min`);
  }

const mix: TenantLoad = {
  chat: s.chatRatePerS,
  nightly: { ratePerS: ref.batchFloodRatePerS },
  free: ref.freeRatePerS,
};
const rows: (ArmRow & { run: ReturnType<typeof runInfo> })[] = [];
for (const arm of arms) {
  log(`${arm}…`);
  const r = await run(arm, mix);
  dumpRecords(arm, r);
  const chat = figures(r, CHAT, slo.chat, s.windows.measureS);
  const nightly = figures(r, NIGHTLY, slo.batch, s.windows.measureS);
  const free = figures(r, FREE, slo.free, s.windows.measureS);
  const solo = chatSolo[arm.startsWith('random') ? 'random' : 'kinference'];
  const row = {
    arm,
    chat,
    nightly,
    free,
    goals: {
      chatP95WithinObjective: chat.ttftP95Ms !== null && chat.ttftP95Ms <= s.chatObjectiveMs,
      chatGoodputVsSolo: solo && solo.goodputPerMin > 0 ? chat.goodputPerMin / solo.goodputPerMin : 0,
      batchGoodputVsLeft: ref.batchLeftPerMin > 0 ? nightly.goodputPerMin / ref.batchLeftPerMin : 0,
      freeAcceptedVsLimit: free.acceptedPromptTokensPerMin.map((n) => n / s.free.limitPerMin),
    },
    wallMs: r.wallMs,
    run: runInfo(r),
  };
  rows.push(row);
  log(
    `  chat p95 ${chat.ttftP95Ms?.toFixed(0)} ms, ${(row.goals.chatGoodputVsSolo * 100).toFixed(1)}% of solo; batch ${(row.goals.batchGoodputVsLeft * 100).toFixed(1)}% of left; free ${free.acceptedPromptTokensPerMin.join(' / ')}; load ${r.loadAvg.after[0]}`,
  );
}

let limit: LiveLimitRun | null = null;
if (limitNodes > 0) {
  log(`the limited tenant alone across ${limitNodes} gateway nodes, ${limitMinutes} whole minutes…`);
  const limitWindows = { warmupS: 30, measureS: 60 * limitMinutes, cooldownS: 5 };
  const r = await run(
    'kinference+policies',
    { chat: null, nightly: null, free: ref.freeRatePerS },
    { ...s, windows: limitWindows },
    limitNodes,
  );
  dumpRecords(`limit-${limitNodes}-nodes`, r);
  const free = figures(r, FREE, slo.free, limitWindows.measureS);
  limit = {
    nodes: limitNodes,
    windows: limitWindows,
    offeredPerS: ref.freeRatePerS,
    limitPerMin: s.free.limitPerMin,
    free,
    acceptedVsLimit: free.acceptedPromptTokensPerMin.map((n) => n / s.free.limitPerMin),
    limiterCounters: free.acceptedPromptTokensPerMin.map(
      (_, m) => r.limiterPromptCounters[String(r.measureStartEpochMs + m * 60_000)] ?? null,
    ),
    run: runInfo(r),
  };
  log(
    `  accepted ${free.acceptedPromptTokensPerMin.join(' / ')} (limiter ${limit.limiterCounters.join(' / ')})`,
  );
}

const args = process.argv.slice(2).join(' ');
const command = args ? `npm run bench:mixed-live -- ${args}` : 'npm run bench:mixed-live';
const report: LiveMixedReport = {
  command,
  desCommand: des.command,
  startedAt,
  endedAt: new Date().toISOString(),
  host: { cores: 2, loadAvgAtStart: loadAtStart, loadAvgAtEnd: loadAt() },
  timeScale: 1,
  pluginSettings: LIVE_PLUGIN_SETTINGS,
  scenario: s,
  slo,
  reference: { ...ref, liveChatSolo: chatSolo, liveSoloRuns: soloInfo },
  arms: rows,
  des: des.arms,
  limit,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync(`bench/results/${values.name}.json`, JSON.stringify(report, null, 2) + '\n');
const md = liveMixedMarkdown(report);
writeFileSync(`bench/results/${values.name}.md`, md);
console.log(`\n${md}`);
