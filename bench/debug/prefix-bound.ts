/**
 * `npx tsx bench/debug/prefix-bound.ts [--arms random,kinference,oracle] [--trials 3] [--seed 42]
 * [--rate 0.27] [--out file]`: runs the shared-prefix Poisson cell of each arm (the seed's schedule, random
 * per keep-alive connection) and prints, pooled over trials, the requests in the measure window split by
 * what the chosen pod had cached: the first use of a prefix in the trial (cold for every router: each cell
 * starts with empty caches), a later use that still prefilled most of the prompt (a miss a router could
 * have avoided, or the fleet's 283k tokens of KV could not hold), a hit that waited (TTFT ≥ 0.3 s: behind
 * another prompt's prefill) and a hit that did not. Then the bound: a first use cannot start its first token
 * before an idle, uncached prefill of its prompt, so when the first uses fill the ranks from the p95 up,
 * no router's p95 is below the shortest such prefill; and the median can be a hit only while first uses
 * are under half the requests.
 */
import { appendFileSync } from 'node:fs';
import { loadModelSetup } from '../lib/setup.js';
import { benchArgs } from '../lib/cli.js';
import { latencyProfile, SEED_SCHEDULE } from '../lib/schedule.js';
import { sloFor } from '../lib/slo.js';
import { fleetOf } from '../lib/des/fleet.js';
import { runArmCell } from '../lib/des/cell-setup.js';
import { idleUncachedTtftMs } from '../lib/des/idle-ttft.js';
import { inMeasureWindow, requestMetrics } from '../lib/stats/metrics.js';
import { percentile } from '../lib/stats/percentile.js';
import type { ArmName, RequestRecord } from '../lib/types.js';

const USAGE = `npx tsx bench/debug/prefix-bound.ts [options]: the shared-prefix Poisson cell of each arm, its requests
split by cache outcome, and the TTFT no router can beat

  --arms a,b,...   default random,kinference,kinference-slo,approx-prefix,consistent-hash,oracle
  --trials N       default 3
  --seed N         default 42
  --rate R         requests/s (default the seed's)
  --out FILE       append the command and the lines to FILE`;

const values = benchArgs('prefix-bound', USAGE, {
  arms: { type: 'string', default: 'random,kinference,kinference-slo,approx-prefix,consistent-hash,oracle' },
  trials: { type: 'string', default: '3' },
  seed: { type: 'string', default: '42' },
  rate: { type: 'string' },
  out: { type: 'string' },
});
const say = (l: string): void => {
  console.log(l);
  if (values.out) appendFileSync(values.out, `${l}\n`);
};
if (values.out) say(`$ npx tsx bench/debug/prefix-bound.ts ${process.argv.slice(2).join(' ')}`);

const s = structuredClone(SEED_SCHEDULE);
if (values.rate) s.poissonRate['shared-prefix'] = Number(values.rate);
const m = await loadModelSetup();
const fleet = fleetOf(s, m);
const slo = sloFor(s, m)['shared-prefix'];
const profile = latencyProfile(s, 'shared-prefix');
const pathMs = s.latency.requestOverheadMs + s.latency.responseOverheadMs;
const seed = Number(values.seed);
const FAST_MS = 300;

interface Row {
  ttftMs: number;
  kind: 'first use' | 'later miss' | 'hit, waited' | 'hit';
  /** The TTFT of this prompt prefilled cold on an idle pod: no first use can beat it. */
  idleColdMs: number;
}

let randomP50 = Number.NaN;
let randomP95 = Number.NaN;
for (const arm of values.arms!.split(',') as ArmName[]) {
  const rows: Row[] = [];
  for (let trial = 0; trial < Number(values.trials); trial++) {
    const r = await runArmCell({
      arm,
      workload: 'shared-prefix',
      shapes: s.shapes,
      profile,
      fleet,
      model: m,
      seed,
      trial,
      slo,
      ...(s.randomRouting ? { randomRouting: s.randomRouting } : {}),
    });
    rows.push(...classify(r.records, r.windowStartMs, r.windowEndMs));
  }
  const ttft = rows.map((x) => x.ttftMs);
  const p50 = percentile(ttft, 0.5);
  const p95 = percentile(ttft, 0.95);
  if (arm === 'random') {
    randomP50 = p50;
    randomP95 = p95;
  }
  const vs = (x: number, base: number): string =>
    Number.isFinite(base) ? ` (${((x / base - 1) * 100).toFixed(1)}%)` : '';
  say(
    `${arm} n=${rows.length} p50=${(p50 / 1000).toFixed(2)}${vs(p50, randomP50)} p95=${(p95 / 1000).toFixed(2)}${vs(p95, randomP95)}`,
  );
  for (const kind of ['first use', 'later miss', 'hit, waited', 'hit'] as const) {
    const k = rows.filter((x) => x.kind === kind).map((x) => x.ttftMs);
    if (k.length === 0) continue;
    say(
      `  ${kind}: ${k.length} (${((k.length / rows.length) * 100).toFixed(1)}%) TTFT min ${(Math.min(...k) / 1000).toFixed(2)} p50 ${(percentile(k, 0.5) / 1000).toFixed(2)} max ${(Math.max(...k) / 1000).toFixed(2)} s`,
    );
  }
  say(`  ${bounds(rows, randomP50, randomP95)}`);
}

/**
 * The arm's requests in the measure window, each with its cache outcome. A first use is the earliest
 * request of its prefix group sent in the trial (warm-up included).
 */
function classify(records: readonly RequestRecord[], startMs: number, endMs: number): Row[] {
  const firstSend = new Map<string, number>();
  for (const r of records) {
    const t = r.firstSentMs ?? r.startMs;
    if (!firstSend.has(r.cluster) || t < firstSend.get(r.cluster)!) firstSend.set(r.cluster, t);
  }
  const rows: Row[] = [];
  for (const r of records) {
    if (!inMeasureWindow(r, startMs, endMs)) continue;
    const ttftMs = requestMetrics(r)!.ttftMs;
    const first = firstSend.get(r.cluster) === (r.firstSentMs ?? r.startMs);
    const cold = r.cachedTokens < r.promptTokens / 2;
    const kind = first ? 'first use' : cold ? 'later miss' : ttftMs >= FAST_MS ? 'hit, waited' : 'hit';
    rows.push({ ttftMs, kind, idleColdMs: idleUncachedTtftMs(fleet.pod, r.promptTokens) + pathMs });
  }
  return rows;
}

/**
 * What no router could do better with these arrivals: the first uses are cold whatever the choice, so with
 * c of them among n the values from rank n − c + 1 up are at least the shortest idle cold prefill; when that
 * reaches the p95's rank, the p95 is bounded by it. The median can be a hit (at best an idle hit) only while
 * first uses are under half.
 */
function bounds(rows: readonly Row[], baseP50: number, baseP95: number): string {
  const n = rows.length;
  const firsts = rows.filter((x) => x.kind === 'first use');
  const floor = Math.min(...firsts.map((x) => x.idleColdMs));
  // GuideLLM's p95 rank on n equal weights: the first value whose running share reaches 0.95.
  const rank95 = percentileRank(n, 0.95);
  const p95Floor = firsts.length >= n - rank95 + 1 ? floor : 0;
  const hits = rows.filter((x) => x.kind === 'hit').map((x) => x.ttftMs);
  const p50Floor = firsts.length < n / 2 && hits.length > 0 ? Math.min(...hits) : floor;
  const pct = (x: number, b: number): string => `${((x / b - 1) * 100).toFixed(1)}%`;
  return `bound: ${firsts.length} first uses of ${n}, the p95 is rank ${rank95}: p95 ≥ ${(p95Floor / 1000).toFixed(2)} s (best ${pct(p95Floor, baseP95)} vs random), median ≥ ${(p50Floor / 1000).toFixed(2)} s (best ${pct(p50Floor, baseP50)})`;
}

/** 1-based rank GuideLLM's percentile takes among n equally weighted values. */
function percentileRank(n: number, q: number): number {
  let cdf = 0;
  for (let i = 0; i < n; i++) {
    cdf += 1 / n;
    if (cdf >= q) return i + 1;
  }
  return n;
}
