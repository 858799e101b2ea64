/**
 * `npm run bench:mixed -- [--measure S] [--gateways N] [--arms a,b] [--seeds a,b] [--name out]`: the mixed-tenant benchmark
 * in virtual time (issue #31 item 6): an interactive chat tenant, a batch tenant flooding shared-prefix work
 * at twice the fleet's capacity, and a tenant over its prompt-token limit, under random, kinference, kinference
 * with policies, and Kong's request-count rate limiting in front of random or kinference. Writes
 * bench/results/<name>.{json,md} (default mixed-tenants): the first seed's report as before (bench:mixed-live
 * takes its offered load from it), and with several seeds each seed's and the pooled goals beside it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { benchArgs, numberArg, orUsage } from './lib/cli.js';
import { fleetOf } from './lib/des/fleet.js';
import { mixedBench, mixedMarkdown } from './lib/mixed/mixed-bench.js';
import { pooledMarkdown, pooledOverSeeds, type SeedRun } from './lib/mixed/over-seeds.js';
import { MIXED_ARMS, MIXED_SCENARIO, type MixedArmName } from './lib/mixed/scenario.js';
import { SEED_SCHEDULE } from './lib/schedule.js';
import { loadModelSetup } from './lib/setup.js';
import { sloFor } from './lib/slo.js';

const USAGE = `npm run bench:mixed -- [options]: three tenants on one emulated fleet in virtual time, five arms side
by side (${MIXED_ARMS.join(', ')}); writes bench/results/<name>.{json,md}

  --measure S     measure window, seconds (default ${MIXED_SCENARIO.windows.measureS}; warmup ${MIXED_SCENARIO.windows.warmupS})
  --gateways N    Kong nodes in front of the kinference arms, one shared limiter store (default 1)
  --arms a,b      a subset of the arms
  --seeds a,b     seeds, one run of every arm each (default ${MIXED_SCENARIO.seed}); with several, the goals
                  are also judged pooled over them (the chat's p95 over every seed's requests, sums of goodput)
  --name NAME     output name (default mixed-tenants)`;

const values = benchArgs('bench:mixed', USAGE, {
  measure: { type: 'string', default: String(MIXED_SCENARIO.windows.measureS) },
  gateways: { type: 'string', default: '1' },
  arms: { type: 'string', default: MIXED_ARMS.join(',') },
  seeds: { type: 'string', default: String(MIXED_SCENARIO.seed) },
  name: { type: 'string', default: 'mixed-tenants' },
});
const measureS = orUsage('bench:mixed', USAGE, () => numberArg('measure', values.measure!, 'whole ≥ 1'));
const gateways = orUsage('bench:mixed', USAGE, () => numberArg('gateways', values.gateways!, 'whole ≥ 1'));
const arms = values.arms!.split(',') as MixedArmName[];
const seeds = orUsage('bench:mixed', USAGE, () =>
  values.seeds!.split(',').map((x) => numberArg('seeds', x.trim(), 'whole ≥ 0')),
);
for (const a of arms)
  if (!MIXED_ARMS.includes(a)) {
    console.error(`bench:mixed: --arms: unknown arm ${a}; expected some of ${MIXED_ARMS.join(', ')}`);
    process.exit(2);
  }

const m = await loadModelSetup();
const fleet = fleetOf(SEED_SCHEDULE, m);
const chatSlo = sloFor(SEED_SCHEDULE, m).multiturn;
const runs: SeedRun[] = [];
for (const seed of seeds) {
  const scenario = {
    ...MIXED_SCENARIO,
    windows: { ...MIXED_SCENARIO.windows, measureS },
    chatObjectiveMs: chatSlo.ttftMs,
    gateways,
    seed,
  };
  const chatTtfts = new Map<MixedArmName, number[]>();
  if (seeds.length > 1) console.log(`seed ${seed}`);
  const report = await mixedBench({
    scenario,
    fleet,
    model: m,
    chatSlo,
    arms,
    log: (l) => console.log(l),
    chatTtfts: (arm, xs) => chatTtfts.set(arm, xs),
  });
  runs.push({ seed, report, chatTtfts });
}
const args = process.argv.slice(2).join(' ');
const command = args ? `npm run bench:mixed -- ${args}` : 'npm run bench:mixed';
mkdirSync('bench/results', { recursive: true });
const [first] = runs;
const pooled = runs.length > 1 ? pooledOverSeeds(runs) : null;
const bySeed = pooled
  ? {
      bySeed: runs.map((r) => ({ seed: r.seed, reference: r.report.reference, arms: r.report.arms })),
      pooled,
    }
  : {};
writeFileSync(
  `bench/results/${values.name}.json`,
  JSON.stringify({ command, ...first!.report, ...bySeed }, null, 2) + '\n',
);
let md = mixedMarkdown(first!.report, command);
if (pooled)
  md += `\nThe table above is seed ${first!.seed}.\n\n${pooledMarkdown(runs, first!.report.scenario.chatObjectiveMs, pooled)}`;
writeFileSync(`bench/results/${values.name}.md`, md);
console.log(`\n${md}`);
