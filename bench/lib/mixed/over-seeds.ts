// The mixed-tenant goals over several seeds: each seed's figures and the goals pooled over all of them.
import { percentile } from '../stats/percentile.js';
import type { MixedReport } from './mixed-bench.js';
import type { MixedArmName } from './scenario.js';

/**
 * One seed of the scenario is one draw of which pods the chat's conversations land on and which batch prefixes
 * get cached before the chat is there to protect: seed 42 puts the chat on all three pods, so the batch gets
 * only the hits on its first few prefixes, while other seeds leave it a pod (docs/policies.md). The goals are
 * judged pooled, as GuideLLM pools trials: the chat's p95 over every seed's requests, goodputs as sums.
 */
export interface SeedRun {
  seed: number;
  report: MixedReport;
  /** Each arm's chat TTFTs in the measure window, ms. */
  chatTtfts: Map<MixedArmName, number[]>;
}

export interface PooledRow {
  arm: MixedArmName;
  /** The chat's TTFT p95 over every seed's requests, ms; and per seed. */
  chatP95Ms: number | null;
  chatP95MsBySeed: (number | null)[];
  /** Σ chat goodput ÷ Σ its solo goodput (same routing family), over the seeds; and per seed. */
  chatGoodputVsSolo: number;
  chatGoodputVsSoloBySeed: number[];
  /** Σ batch goodput ÷ Σ capacity left, over the seeds; and per seed. */
  batchGoodputVsLeft: number;
  batchGoodputVsLeftBySeed: number[];
  /** The limited tenant's worst whole minute, |accepted ÷ limit − 1|, over every seed. */
  freeWorstOff: number;
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

export function pooledOverSeeds(runs: readonly SeedRun[]): PooledRow[] {
  const first = runs[0];
  if (!first) return [];
  return first.report.arms.map(({ arm }) => {
    const rows = runs.map((r) => {
      const row = r.report.arms.find((a) => a.arm === arm);
      if (!row) throw new Error(`bench:mixed: seed ${r.seed} has no ${arm} arm`);
      return { run: r, row };
    });
    const family = arm.startsWith('random') ? 'random' : 'kinference';
    const ttfts = rows.flatMap(({ run }) => run.chatTtfts.get(arm) ?? []);
    const soloGood = sum(rows.map(({ run }) => run.report.reference.chatSolo[family].goodputPerMin));
    const left = sum(rows.map(({ run }) => run.report.reference.batchLeftPerMin));
    return {
      arm,
      chatP95Ms: ttfts.length ? percentile(ttfts, 0.95) : null,
      chatP95MsBySeed: rows.map(({ row }) => row.chat.ttftP95Ms),
      chatGoodputVsSolo: soloGood > 0 ? sum(rows.map(({ row }) => row.chat.goodputPerMin)) / soloGood : 0,
      chatGoodputVsSoloBySeed: rows.map(({ row }) => row.goals.chatGoodputVsSolo),
      batchGoodputVsLeft: left > 0 ? sum(rows.map(({ row }) => row.nightly.goodputPerMin)) / left : 0,
      batchGoodputVsLeftBySeed: rows.map(({ row }) => row.goals.batchGoodputVsLeft),
      freeWorstOff: Math.max(
        ...rows.flatMap(({ row }) => row.goals.freeAcceptedVsLimit.map((x) => Math.abs(x - 1))),
      ),
    };
  });
}

const pc = (x: number): string => `${(x * 100).toFixed(1)}%`;
const ms = (x: number | null): string => (x === null ? '–' : x.toFixed(0));
const ok = (b: boolean): string => (b ? '✓' : '✗');

/** The pooled table and the per-seed figures behind it, as Markdown. */
export function pooledMarkdown(
  runs: readonly SeedRun[],
  objectiveMs: number,
  pooled: readonly PooledRow[] = pooledOverSeeds(runs),
): string {
  const seeds = runs.map((r) => r.seed);
  const lines = [
    `## Over seeds ${seeds.join(', ')} (pooled: the chat's p95 over every seed's requests, goodputs summed)`,
    '',
    'Per seed: capacity left for the batch ' +
      runs.map((r) => `${r.seed}: ${r.report.reference.batchLeftPerMin.toFixed(1)}/min`).join(', ') +
      '; chat alone (kinference) ' +
      runs
        .map((r) => `${r.seed}: ${r.report.reference.chatSolo.kinference.goodputPerMin.toFixed(1)}/min`)
        .join(', ') +
      '.',
    '',
    `| arm | chat TTFT p95 pooled (per seed), ms | chat goodput vs solo (per seed) | batch goodput vs left (per seed) | free worst minute off its limit |`,
    '|---|---|---|---|---|',
  ];
  for (const p of pooled) {
    lines.push(
      `| ${p.arm} | ${ms(p.chatP95Ms)} ${ok(p.chatP95Ms !== null && p.chatP95Ms <= objectiveMs)} (${p.chatP95MsBySeed.map(ms).join(' / ')}) | ` +
        `${pc(p.chatGoodputVsSolo)} ${ok(p.chatGoodputVsSolo >= 0.95)} (${p.chatGoodputVsSoloBySeed.map(pc).join(' / ')}) | ` +
        `${pc(p.batchGoodputVsLeft)} ${ok(p.batchGoodputVsLeft >= 0.8)} (${p.batchGoodputVsLeftBySeed.map(pc).join(' / ')}) | ` +
        `${pc(p.freeWorstOff)} ${ok(p.freeWorstOff <= 0.02)} |`,
    );
  }
  lines.push('');
  return lines.join('\n');
}
