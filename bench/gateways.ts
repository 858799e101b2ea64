/**
 * `npm run bench:gateways -- [options]`: active-active Kong nodes measured live (issue #29 item 1). The same
 * cell (seed, trial, arrivals, prompts) through N = 1, 2, 4, 8 stand-in nodes, each with its own plugin
 * server, over one Redis, emulated pods and the collector; the client deals requests over the nodes in
 * turn. One stack with the most nodes for every cell, cell N through the first N, all in one run, side by side. Writes bench/results/<name>.{json,md}.
 */
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { benchArgs, numberArg, orUsage, UsageError } from './lib/cli.js';
import { compactRecord } from './lib/live/compact-record.js';
import { runSpreadCell, type NodeDecision } from './lib/live/spread-cell.js';
import { resetPrefixCaches, startLiveStack, type LiveStack } from './lib/live/stack.js';
import { scheduleStack, warmGateways } from './lib/live/warm-gateways.js';
import { hostMeta, writeResultFile } from './lib/result-file.js';
import { latencyProfile, SEED_SCHEDULE } from './lib/schedule.js';
import { loadModelSetup } from './lib/setup.js';
import { sloFor } from './lib/slo.js';
import { goodputPerMin, type Slo } from './lib/stats/goodput.js';
import { erroredInWindow, inMeasureWindow, requestMetrics } from './lib/stats/metrics.js';
import { percentile } from './lib/stats/percentile.js';
import { WORKLOAD_NAMES, type Profile, type WorkloadName } from './lib/types.js';
import { WorkloadFactory } from './lib/workload/workloads.js';
import { gatewaysMarkdown, type GatewayCell } from './lib/live/gateways-report.js';

const USAGE = `npm run bench:gateways -- [options]: the same live cell through N Kong stand-in nodes (each its own
plugin server, one Redis), the client dealing requests over them in turn; writes bench/results/<name>.{json,md}

  --workloads w,...   of control, shared-prefix, multiturn (default shared-prefix,multiturn)
  --nodes n,...       Kong node counts (default 1,2,4,8)
  --time-scale X      the pods run X times faster than the model, client times × X (default 1)
  --warmup-s S        warm-up, virtual seconds (default 60)
  --measure-s S       measure window, virtual seconds (default 180)
  --trial N           which trial's prompts and arrivals (default 0)
  --name NAME         results file name (default gateways-live)`;

const values = benchArgs('bench:gateways', USAGE, {
  workloads: { type: 'string', default: 'shared-prefix,multiturn' },
  nodes: { type: 'string', default: '1,2,4,8' },
  'time-scale': { type: 'string', default: '1' },
  'warmup-s': { type: 'string', default: '60' },
  'measure-s': { type: 'string', default: '180' },
  trial: { type: 'string', default: '0' },
  name: { type: 'string', default: 'gateways-live' },
});
const { workloads, nodeCounts, timeScale, warmupS, measureS, trial } = orUsage(
  'bench:gateways',
  USAGE,
  () => {
    const workloads = values.workloads.split(',') as WorkloadName[];
    for (const w of workloads)
      if (!WORKLOAD_NAMES.includes(w))
        throw new UsageError(`--workloads: ${w} is not one of ${WORKLOAD_NAMES.join(', ')}`);
    return {
      workloads,
      nodeCounts: values.nodes.split(',').map((n) => numberArg('nodes', n, 'whole ≥ 1')),
      timeScale: numberArg('time-scale', values['time-scale'], 'positive'),
      warmupS: numberArg('warmup-s', values['warmup-s'], 'positive'),
      measureS: numberArg('measure-s', values['measure-s'], 'positive'),
      trial: numberArg('trial', values.trial, 'whole ≥ 0'),
    };
  },
);

const s = SEED_SCHEDULE;
const args = process.argv.slice(2).join(' ');
const command = args ? `npm run bench:gateways -- ${args}` : 'npm run bench:gateways';
const model = await loadModelSetup();
const cli = fileURLToPath(new URL('../../bin/kinference.js', import.meta.url));
const slos = sloFor(s, model);
/**
 * Beside the defaults, the same for every N. expose_headers: each request's decision (fallback, expected
 * prefix) reaches the access log. redis_timeout_ms: the default 25 ms lookup budget on 2 shared cores
 * would route some requests on load alone, more with more plugin servers competing, and that is the host,
 * not sharing. decision_workers 0: eight plugin servers each with a pool of tokenizer threads would not fit.
 */
const PLUGIN_SETTINGS = { expose_headers: true, redis_timeout_ms: 250, decision_workers: 0 };

const round = (x: number, d = 1): number => Math.round(x * 10 ** d) / 10 ** d;

function figures(
  workload: WorkloadName,
  nodes: number,
  slo: Slo,
  run: Awaited<ReturnType<typeof runSpreadCell>>,
  load: { before: number[]; after: number[] },
  wallS: number,
): GatewayCell {
  const { records, decisions, windowStartMs, windowEndMs } = run;
  const inWindow = records
    .map((r, i) => ({ r, d: decisions[i] ?? null }))
    .filter((x) => inMeasureWindow(x.r, windowStartMs, windowEndMs));
  const ttft = inWindow.map((x) => requestMetrics(x.r)!.ttftMs).sort((a, b) => a - b);
  const prompt = inWindow.reduce((a, x) => a + x.r.promptTokens, 0);
  const cached = inWindow.reduce((a, x) => a + x.r.cachedTokens, 0);
  const perNode = Array.from({ length: nodes }, () => 0);
  const perPod: Record<string, number> = {};
  const fallbacks: Record<string, number> = {};
  for (const { r, d } of inWindow) {
    if (d) perNode[d.node]!++;
    perPod[r.pod] = (perPod[r.pod] ?? 0) + 1;
    if (d?.fallback) fallbacks[d.fallback] = (fallbacks[d.fallback] ?? 0) + 1;
  }
  return {
    workload,
    nodes,
    requests: inWindow.length,
    errored: erroredInWindow(records, windowStartMs, windowEndMs).length,
    hitRate: prompt > 0 ? cached / prompt : 0,
    ttftP50Ms: round(percentile(ttft, 0.5)),
    ttftP95Ms: round(percentile(ttft, 0.95)),
    goodputPerMin: round(goodputPerMin(records, slo, windowStartMs, windowEndMs), 2),
    perNode,
    perPod,
    fallbacks,
    loadAvg: load,
    wallS: round(wallS),
  };
}

const cells: GatewayCell[] = [];
const requests: Record<string, (ReturnType<typeof compactRecord> & Partial<NodeDecision>)[]> = {};
let current: LiveStack | null = null;
const onSignal = (): void => void (current?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
process.once('SIGINT', onSignal);
process.once('SIGTERM', onSignal);
const startedAt = new Date().toISOString();
const t0 = performance.now();
// One stack for every cell, with the most nodes; cell N sends through the first N (the others idle).
const stack = await startLiveStack({
  ...scheduleStack(s, { timeScale, model, cli }),
  gateways: Math.max(...nodeCounts),
  pluginExtra: PLUGIN_SETTINGS,
});
current = stack;
try {
  await warmGateways(stack, model);
  console.error(`gateways: stack up in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  for (const workload of workloads) {
    const profile: Profile = { ...latencyProfile(s, workload), warmupS, measureS, cooldownS: 20 };
    for (const nodes of nodeCounts) {
      const t1 = performance.now();
      // Between cells: no calibration or cached block carried over (the warm-ups' or the last cell's), and
      // every reservation ended with its response (the last cell waited for them all).
      await stack.restartCollector();
      await resetPrefixCaches(stack);
      const before = loadavg().map((x) => round(x, 2));
      console.error(`gateways: ${workload} N=${nodes} (load ${before.join(' ')})…`);
      const run = await runSpreadCell({
        stack,
        factory: new WorkloadFactory(workload, s.shapes, model.synth, s.seed, trial),
        profile,
        timeScale,
        model,
        seed: s.seed,
        trial,
        nodes,
      });
      const after = loadavg().map((x) => round(x, 2));
      const cell = figures(
        workload,
        nodes,
        slos[workload],
        run,
        { before, after },
        (performance.now() - t1) / 1000,
      );
      cells.push(cell);
      requests[`${workload}:${nodes}`] = run.records.map((r, i) => ({
        ...compactRecord(r),
        ...(run.decisions[i] ?? {}),
      }));
      console.error(JSON.stringify(cell));
    }
  }
} finally {
  current = null;
  await stack.stop();
}
process.removeListener('SIGINT', onSignal);
process.removeListener('SIGTERM', onSignal);

const meta = {
  command,
  startedAt,
  ...hostMeta(),
  timeScale,
  trial,
  seed: s.seed,
  windows: { warmupS, measureS, cooldownS: 20 },
  rates: Object.fromEntries(workloads.map((w) => [w, s.poissonRate[w]])),
  slo: Object.fromEntries(workloads.map((w) => [w, slos[w]])),
  pods: s.pods,
  pluginSettings: PLUGIN_SETTINGS,
};
const md = gatewaysMarkdown(meta, cells);
writeResultFile(`bench/results/${values.name}.json`, { meta, cells, requests });
writeFileSync(`bench/results/${values.name}.md`, md + '\n');
console.log(md);
