/**
 * `npx tsx bench/debug/cell-trace.ts [--workload shared-prefix] [--arm kinference|kinference-slo|oracle]
 * [--trial 0] [--rate 0.25] [--streams N] [--collector-calibration] [--out file.jsonl]`: runs ONE discrete-event cell and writes, per request,
 * what the arm chose and — for every pod, at decision time — the router's prediction (kinference) and the
 * exact forward-model TTFT the oracle would compute, next to the actual TTFT. A diagnosis tool: where do
 * kinference's choices differ from the oracle's, and why.
 */
import { writeFileSync } from 'node:fs';
import { MemoryKvIndex } from '../../src/index/index.js';
import type { RouteOutcome } from '../../src/router/router.js';
import { benchArgs } from '../lib/cli.js';
import { loadModelSetup, routerConfig } from '../lib/setup.js';
import { capacityProfile, latencyProfile, SEED_SCHEDULE } from '../lib/schedule.js';
import { fleetOf } from '../lib/des/fleet.js';
import { CollectorFeed } from '../lib/des/feed.js';
import { kinferenceArm } from '../lib/des/kinference-arm.js';
import { exactTtftMs, oracleArm } from '../lib/des/oracle-arm.js';
import { cellEnvironment, simPods } from '../lib/des/cell-setup.js';
import { runCell } from '../lib/des/run-cell.js';
import { WorkloadFactory } from '../lib/workload/workloads.js';
import type { Arm } from '../lib/arms/types.js';
import type { Profile, WorkloadName } from '../lib/types.js';
import { inMeasureWindow } from '../lib/stats/metrics.js';
import { sloFor } from '../lib/slo.js';

const USAGE = `npx tsx bench/debug/cell-trace.ts [options]: one discrete-event cell, one JSON line per request: the
pod chosen, every pod's predicted and exact TTFT (and the ITL guard's prediction) at decision time, the actual
TTFT and ITL

  --workload W           control, shared-prefix or multiturn (default shared-prefix)
  --arm A                kinference, kinference-slo or oracle (default kinference)
  --trial N              default 0
  --rate R | --streams N the Poisson cell at R requests/s (default the seed's) or N closed-loop streams
  --collector-calibration  calibrate each pod from its /metrics as the collector does
  --config JSON          router config overrides, e.g. '{"itl_slo_ms":100}'
  --out FILE             default /tmp/cell-trace.jsonl`;

const values = benchArgs('cell-trace', USAGE, {
  workload: { type: 'string', default: 'shared-prefix' },
  arm: { type: 'string', default: 'kinference' },
  trial: { type: 'string', default: '0' },
  rate: { type: 'string' },
  streams: { type: 'string' },
  'collector-calibration': { type: 'boolean', default: false },
  config: { type: 'string', default: '{}' },
  out: { type: 'string', default: '/tmp/cell-trace.jsonl' },
});
const s = SEED_SCHEDULE;
const workload = values.workload as WorkloadName;
const trial = Number(values.trial);
const m = await loadModelSetup();
const fleet = fleetOf(s, m);
const profile: Profile = values.streams
  ? capacityProfile(s, Number(values.streams))
  : latencyProfile(
      { ...s, poissonRate: { ...s.poissonRate, [workload]: Number(values.rate ?? s.poissonRate[workload]) } },
      workload,
    );
const pods = simPods(fleet, s.seed, trial);
let now = 0;
const overhead = fleet.latency.requestOverheadMs + fleet.latency.responseOverheadMs;
const trace = new Map<string, Record<string, unknown>>();
let feed: CollectorFeed | null = null;
let inner: Arm;
if (values.arm === 'kinference' || values.arm === 'kinference-slo') {
  const index = new MemoryKvIndex();
  feed = new CollectorFeed(index, m.model, fleet.pod.blockSize, values['collector-calibration']);
  let config = routerConfig(m, JSON.parse(values.config!) as Record<string, unknown>);
  if (values.arm === 'kinference-slo') {
    const slo = sloFor(s, m)[workload];
    config = { ...config, itl_slo_ms: slo.itlMs, shed_ttft_slo_ms: slo.ttftMs };
  }
  inner = kinferenceArm(config, index, m.template, m.promptTokenizer, () => now, values.arm);
} else inner = oracleArm(() => pods, overhead);
const arm: Arm = {
  name: inner.name,
  async choose(req, views, nowMs) {
    const exact = Object.fromEntries(
      pods.map((p) => [p.id, exactTtftMs(p, req.promptTokenIds, 256, overhead)]),
    );
    const d = await inner.choose(req, views, nowMs);
    const o = d.token as RouteOutcome | undefined;
    trace.set(req.key, {
      t: nowMs,
      chosen: d.podId,
      shed: d.rejected !== undefined,
      waitedMs: d.wait ? null : 0,
      exact,
      pred: o
        ? Object.fromEntries(
            o.decision.candidates.map((c) => [
              c.podId,
              {
                ttft: Math.round(c.predictedTtftMs),
                cached: c.cachedTokens,
                q: Math.round(c.queuedTokens),
                run: c.running,
                wait: c.waiting,
                intf: Math.round(c.interferenceMs),
                credit: c.cacheCredit,
                itl: c.predictedItlMs === null ? null : Math.round(c.predictedItlMs),
                okItl: c.withinItl,
              },
            ]),
          )
        : null,
    });
    return d;
  },
  // A request held in the gateway (overload_wait_ms, class admission): when it was placed, and where.
  ...(inner.redecide
    ? {
        async redecide(req, first, nowMs, waitedMs) {
          const d = await inner.redecide!(req, first, nowMs, waitedMs);
          const t = trace.get(req.key);
          if (t) {
            t.redecisions = ((t.redecisions as number | undefined) ?? 0) + 1;
            if (!d.wait) Object.assign(t, { chosen: d.podId, waitedMs: Math.round(waitedMs) });
          }
          return d;
        },
      }
    : {}),
  onComplete: inner.onComplete?.bind(inner),
};
const factory = new WorkloadFactory(workload, s.shapes, m.synth, s.seed, trial);
const r = await runCell({
  arm,
  factory,
  profile,
  pods,
  ...cellEnvironment(m, fleet),
  seed: s.seed,
  trial,
  feed,
  trackBlockHashes: true,
  onProgress: (t) => {
    now = t;
  },
});
const lines = r.records.map((rec) =>
  JSON.stringify({
    key: rec.key,
    cluster: rec.cluster,
    pod: rec.pod,
    inWindow: inMeasureWindow(rec, r.windowStartMs, r.windowEndMs),
    start: Math.round(rec.startMs),
    end: rec.endMs === null ? null : Math.round(rec.endMs),
    first: rec.firstTokenMs === null ? null : Math.round(rec.firstTokenMs),
    ttft: rec.firstTokenMs === null ? null : Math.round(rec.firstTokenMs - rec.startMs),
    // GuideLLM's ITL: the decode time over the tokens after the first.
    itl:
      rec.firstTokenMs !== null && rec.lastTokenMs !== null && rec.outputTokens > 1
        ? +((rec.lastTokenMs - rec.firstTokenMs) / (rec.outputTokens - 1)).toFixed(1)
        : null,
    cachedTokens: rec.cachedTokens,
    promptTokens: rec.promptTokens,
    ...trace.get(rec.key),
  }),
);
writeFileSync(values.out, lines.join('\n') + '\n');
const ttfts = r.records
  .filter((x) => inMeasureWindow(x, r.windowStartMs, r.windowEndMs) && x.firstTokenMs !== null)
  .map((x) => x.firstTokenMs! - x.startMs)
  .sort((a, b) => a - b);
const q = (p: number): number => ttfts[Math.max(0, Math.ceil(p * ttfts.length) - 1)]!;
console.log(
  `${values.arm} ${workload} trial ${trial}: n=${ttfts.length} median ${(q(0.5) / 1000).toFixed(2)} s p95 ${(q(0.95) / 1000).toFixed(2)} s wall ${(r.wallMs / 1000).toFixed(1)} s → ${values.out}`,
);
