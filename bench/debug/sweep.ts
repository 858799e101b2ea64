/**
 * `npx tsx bench/debug/sweep.ts --cells shared-prefix:p,shared-prefix:16 [--arm kinference] [--trials 3]
 * [--seeds 42,43] [--config '{"field":value}'] [--client-workers 10] [--arrivals guidellm] [--random-routing per-request] [--kv-capacity T]
 * [--emulator-profile h100-27b-fp8] [--rates multiturn=0.3] [--collector-calibration]
 * [--collector-restart S [--replay-batches N]] [--gateways N] [--by-turn] [--retry-429 N] [--out file]`: runs the given discrete-event cells (workload:p for the
 * Poisson profile, workload:N for N streams) of one arm in this process, router config = the benchmark's
 * with the JSON overrides, and prints per cell, pooled over seeds × trials: n, share of TTFT < 0.3 s,
 * TTFT p50/p95, hit ≥ ½ prompt, goodput/min under the seed SLO, ITL p50, shares meeting the TTFT and ITL
 * bounds, requests per pod, requests answered 429 (shed) in the window, engine preemptions; with `--retry-429`
 * (a client that sends a 429'd request again after its Retry-After), the retried requests' outcome. A quick A/B loop for router changes over more seeds than the published run;
 * published figures come only from `npm run bench:seed`. `--out` appends the command and the lines to a file.
 */
import { appendFileSync } from 'node:fs';
import { loadModelSetup, routerConfig } from '../lib/setup.js';
import { applyClientArgs, CLIENT_ARG_OPTIONS, clientArgsUsage } from '../lib/cli-args.js';
import { benchArgs, numberArg, orUsage } from '../lib/cli.js';
import { capacityProfile, latencyProfile, SEED_SCHEDULE } from '../lib/schedule.js';
import { sloFor } from '../lib/slo.js';
import { fleetOf } from '../lib/des/fleet.js';
import { runArmCell } from '../lib/des/cell-setup.js';
import { goodputPerMin } from '../lib/stats/goodput.js';
import { erroredInWindow, inMeasureWindow, requestMetrics } from '../lib/stats/metrics.js';
import { percentile } from '../lib/stats/percentile.js';
import type { ArmName, Profile, RequestRecord, WorkloadName } from '../lib/types.js';

const USAGE = `npx tsx bench/debug/sweep.ts --cells W:p|W:N,... [options]: discrete-event cells of one arm, printed one
line each (pooled over seeds x trials); published figures come only from npm run bench:seed

  --cells W:p,W:N,...    workload:p for its Poisson cell, workload:N for N streams (default shared-prefix:p)
  --arm A                one arm (default kinference)
  --trials N             default 3
  --seed N | --seeds a,b default 42
  --config JSON          router config overrides, e.g. '{"itl_slo_ms":100}'
  --collector-calibration  calibrate each pod from its /metrics as the collector does
  --collector-restart S  the kinference arms' collector restarts at virtual second S, rebuilding each pod
                         from its last --replay-batches KV-event batches (default 10000, vLLM's buffer_steps)
  --gateways N           Kong nodes in front of the kinference arms, each with its own router (default 1),
                         taking requests in turn
  --by-turn              also one line per turn index (multiturn): n, TTFT p50/p95, uncached tokens p50,
                         share with more than half the prompt uncached
  --retry-429 N          the client sends a request answered 429 again after its Retry-After, up to N times
                         (default 0, as GuideLLM: the request fails); adds a line on the retried requests
  --out FILE             append the command and the lines to FILE
${clientArgsUsage(SEED_SCHEDULE)}`;

const values = benchArgs('sweep', USAGE, {
  cells: { type: 'string', default: 'shared-prefix:p' },
  arm: { type: 'string', default: 'kinference' },
  trials: { type: 'string', default: '3' },
  seed: { type: 'string', default: '42' },
  seeds: { type: 'string' },
  config: { type: 'string', default: '{}' },
  ...CLIENT_ARG_OPTIONS,
  'collector-calibration': { type: 'boolean', default: false },
  'collector-restart': { type: 'string' },
  'replay-batches': { type: 'string', default: '10000' },
  gateways: { type: 'string', default: '1' },
  'by-turn': { type: 'boolean', default: false },
  'retry-429': { type: 'string', default: '0' },
  out: { type: 'string' },
});
if (values.out)
  appendFileSync(
    values.out,
    `$ npx tsx bench/debug/sweep.ts ${process.argv.slice(2).map(quoteArg).join(' ')}\n`,
  );
const seeds = (values.seeds ?? values.seed!).split(',').map(Number);
const s = structuredClone(SEED_SCHEDULE);
orUsage('sweep', USAGE, () => applyClientArgs(s, values));
const m = await loadModelSetup();
const fleet = fleetOf(s, m);
const slo = sloFor(s, m);
const config = routerConfig(m, JSON.parse(values.config!) as Record<string, unknown>);
const gateways = orUsage('sweep', USAGE, () => numberArg('gateways', values.gateways!, 'whole ≥ 1'));
const restart = orUsage('sweep', USAGE, () =>
  values['collector-restart'] === undefined
    ? null
    : {
        atS: numberArg('collector-restart', values['collector-restart'], 'whole ≥ 0'),
        replayBatches: numberArg('replay-batches', values['replay-batches']!, 'whole ≥ 0'),
      },
);

const retries = orUsage('sweep', USAGE, () => numberArg('retry-429', values['retry-429']!, 'whole ≥ 0'));

for (const cell of values.cells!.split(',')) {
  const [w, p] = cell.split(':') as [WorkloadName, string];
  const profile: Profile = p === 'p' ? latencyProfile(s, w) : capacityProfile(s, Number(p));
  profile.retry429 = retries;
  const recs: RequestRecord[] = [];
  const retried: RequestRecord[][] = [];
  let good = 0;
  let shed = 0;
  let preemptions = 0;
  const t0 = Date.now();
  const trials = Number(values.trials) * seeds.length;
  for (const seed of seeds)
    for (let trial = 0; trial < Number(values.trials); trial++) {
      const r = await runArmCell({
        arm: values.arm as ArmName,
        workload: w,
        shapes: s.shapes,
        profile,
        fleet,
        model: m,
        seed,
        trial,
        config,
        slo: slo[w],
        ...(s.randomRouting ? { randomRouting: s.randomRouting } : {}),
        collectorCalibration: values['collector-calibration'],
        ...(restart ? { collectorRestart: restart } : {}),
        gateways,
      });
      recs.push(...r.records.filter((x) => inMeasureWindow(x, r.windowStartMs, r.windowEndMs)));
      if (retries > 0) retried.push(...retriedInWindow(r.records, r.windowStartMs, r.windowEndMs));
      preemptions += r.pods.reduce((a, p) => a + p.preemptions, 0);
      shed += erroredInWindow(r.records, r.windowStartMs, r.windowEndMs).length;
      good += goodputPerMin(r.records, slo[w], r.windowStartMs, r.windowEndMs) / trials;
    }
  const ms = recs.map((r) => requestMetrics(r)!).filter(Boolean);
  const { ttft, fast, hit } = cacheShares(recs);
  const itl = ms.map((x) => x.itlMs ?? 0);
  const okT = ms.filter((x) => x.ttftMs <= slo[w].ttftMs).length / ms.length;
  const okI = ms.filter((x) => (x.itlMs ?? 0) <= slo[w].itlMs).length / ms.length;
  const byPod = new Map<string, number>();
  for (const r of recs) byPod.set(r.pod, (byPod.get(r.pod) ?? 0) + 1);
  const afterRestart = restart ? restartWindow(recs, restart.atS * 1000) : '';
  const line = `${values.arm} ${cell}${afterRestart} n=${ttft.length} shed=${shed} preempt=${preemptions} fast=${(fast * 100).toFixed(1)}% p50=${(percentile(ttft, 0.5) / 1000).toFixed(2)} p95=${(percentile(ttft, 0.95) / 1000).toFixed(2)} hit=${(hit * 100).toFixed(0)}% good=${good.toFixed(1)}/min itl50=${percentile(itl, 0.5).toFixed(0)} okTTFT=${(okT * 100).toFixed(0)}% okITL=${(okI * 100).toFixed(0)}% pods=${[...byPod.values()].join('/')} (${((Date.now() - t0) / 1000).toFixed(0)} s) ${values.config}`;
  const lines = [
    line,
    ...(retries > 0 ? [retryLine(retried, slo[w])] : []),
    ...(values['by-turn'] ? byTurn(recs) : []),
  ];
  for (const l of lines) {
    console.log(l);
    if (values.out) appendFileSync(values.out, `${l}\n`);
  }
}

/**
 * The requests answered 429 at least once whose first attempt was sent in the measure window, each as its
 * attempts in order (the retries of one request share the first attempt's conversation, turn and send time).
 */
function retriedInWindow(
  records: readonly RequestRecord[],
  startMs: number,
  endMs: number,
): RequestRecord[][] {
  const byFirst = new Map<string, RequestRecord[]>();
  for (const r of records) {
    const k = `${r.conversationId}/${r.turnIndex}@${r.firstSentMs ?? r.startMs}`;
    byFirst.set(k, [...(byFirst.get(k) ?? []), r]);
  }
  return [...byFirst.values()].filter((a) => {
    const first = a[0]!;
    return a.length > 1 && first.startMs >= startMs && first.startMs < endMs;
  });
}

/**
 * The retried requests' outcome: how many, how many one of their retries got served (and within the SLO,
 * TTFT counted from that retry's own send), the tries it took, and the wait from the first attempt to the
 * first token.
 */
function retryLine(retried: readonly RequestRecord[][], bound: { ttftMs: number; itlMs: number }): string {
  const served = retried.flatMap((a) => a.filter((r) => r.status === 'successful').slice(0, 1));
  const ok = served.filter((r) => {
    const m = requestMetrics(r);
    return m !== null && m.ttftMs <= bound.ttftMs && (m.itlMs ?? 0) <= bound.itlMs;
  });
  const wait = served.map((r) => r.firstTokenMs! - (r.firstSentMs ?? r.startMs));
  const tries = served.map((r) => (r.attempt ?? 0) + 1);
  const n = retried.length;
  const pct = (x: number): string => (n > 0 ? `${((x / n) * 100).toFixed(0)}%` : '–');
  return `  retried: n=${n} served=${served.length} (${pct(served.length)}) withinSLO=${ok.length} (${pct(ok.length)}) tries p50=${percentile(tries, 0.5) ?? '–'} max=${Math.max(0, ...tries)} first-attempt-to-first-token p50=${(percentile(wait, 0.5) / 1000).toFixed(1)} p95=${(percentile(wait, 0.95) / 1000).toFixed(1)} s`;
}

/** Per turn index: how many, their TTFT, and how much of each prompt the chosen pod had to prefill. */
function byTurn(recs: readonly RequestRecord[]): string[] {
  const turns = [...new Set(recs.map((r) => r.turnIndex))].sort((a, b) => a - b);
  return turns.map((t) => {
    const rs = recs.filter((r) => r.turnIndex === t);
    const { ttft } = cacheShares(rs);
    const uncached = rs.map((r) => r.promptTokens - r.cachedTokens);
    const mostlyCold = rs.filter((r) => r.cachedTokens < r.promptTokens / 2).length / rs.length;
    return `  turn ${t}: n=${rs.length} (${((rs.length / recs.length) * 100).toFixed(0)}%) p50=${(percentile(ttft, 0.5) / 1000).toFixed(2)} p95=${(percentile(ttft, 0.95) / 1000).toFixed(2)} uncached p50=${percentile(uncached, 0.5)} cold=${(mostlyCold * 100).toFixed(0)}%`;
  });
}

/** TTFTs of the records that have one, the share under 0.3 s, and the share with half the prompt cached. */
function cacheShares(recs: readonly RequestRecord[]): { ttft: number[]; fast: number; hit: number } {
  const ttft = recs.map((r) => requestMetrics(r)?.ttftMs).filter((x): x is number => x !== undefined);
  return {
    ttft,
    fast: ttft.filter((x) => x < 300).length / ttft.length,
    hit: recs.filter((r) => r.cachedTokens >= r.promptTokens / 2).length / recs.length,
  };
}

/** The requests sent in the minute after the collector restart: how fast the index recovers. */
function restartWindow(recs: readonly RequestRecord[], atMs: number): string {
  const { ttft, fast, hit } = cacheShares(recs.filter((r) => r.startMs >= atMs && r.startMs < atMs + 60_000));
  return ` [first minute after the restart: n=${ttft.length} fast=${(fast * 100).toFixed(1)}% p50=${(percentile(ttft, 0.5) / 1000).toFixed(2)} hit=${(hit * 100).toFixed(0)}%]`;
}

/** An argument as a shell would need it quoted (the JSON of --config). */
function quoteArg(a: string): string {
  return /^[\w.,:=/-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`;
}
