// The live mixed-tenant report: each arm beside its discrete-event twin, and the limit across N nodes.
import type { ArmRow, MixedReport } from './mixed-bench.js';
import { CHAT, FREE, NIGHTLY, type MixedScenario } from './scenario.js';
import type { TenantFigures } from './tenant-metrics.js';

interface RunInfo {
  measureStart: string;
  loadAvg: { before: number[]; after: number[] };
  uncountedAdmissions: number;
  limiterPromptCounters: Record<string, number>;
  wallMs: number;
}

/** The limited tenant alone, dealt in turn across N gateway nodes on one Redis. */
export interface LiveLimitRun {
  nodes: number;
  windows: { warmupS: number; measureS: number; cooldownS: number };
  offeredPerS: number;
  limitPerMin: number;
  free: TenantFigures;
  acceptedVsLimit: number[];
  /** The limiter's own counter in Redis for each of those minutes. */
  limiterCounters: (number | null)[];
  run: RunInfo;
}

export interface LiveMixedReport {
  command: string;
  desCommand: string;
  startedAt: string;
  endedAt: string;
  host: { cores: number; loadAvgAtStart: number[]; loadAvgAtEnd: number[] };
  timeScale: number;
  pluginSettings: Record<string, unknown>;
  scenario: MixedScenario;
  slo: MixedReport['slo'];
  reference: MixedReport['reference'] & {
    liveChatSolo: Partial<Record<'random' | 'kinference', TenantFigures>>;
    liveSoloRuns: Record<string, RunInfo>;
  };
  arms: (ArmRow & { run: RunInfo })[];
  des: ArmRow[];
  limit: LiveLimitRun | null;
  /** What was done to the figures after the run, if anything. */
  note?: string;
}

const fmt = (x: number | null | undefined): string => (x === null || x === undefined ? '–' : x.toFixed(0));
const pc = (x: number): string => `${(x * 100).toFixed(1)}%`;
const ok = (b: boolean): string => (b ? '✓' : '✗');
const refusedN = (f: TenantFigures): number => Object.values(f.refused).reduce((x, y) => x + y, 0);
const freeOk = (xs: number[]): boolean => xs.length > 0 && xs.every((x) => Math.abs(x - 1) <= 0.02);

/** The side-by-side tables of a live report, as Markdown. */
export function liveMixedMarkdown(r: LiveMixedReport): string {
  const s = r.scenario;
  const ref = r.reference;
  const solo = ref.liveChatSolo;
  const lines = [
    '# Mixed-tenant fleet, live (Kong stand-in + plugin server + emulated pods, time scale 1)',
    '',
    `Command: \`${r.command}\` (${r.startedAt} – ${r.endedAt}); the DES twin: \`${r.desCommand}\`.`,
    `Host: ${r.host.cores} cores shared with other runs, load average (1/5/15 min) ${r.host.loadAvgAtStart.join(' / ')} at the start, ${r.host.loadAvgAtEnd.join(' / ')} at the end.`,
    '',
    `Same tenants, rates and objectives as the DES run: \`${CHAT}\` multiturn at ${s.chatRatePerS}/s (interactive, objective ${s.chatObjectiveMs.toFixed(0)} ms), ` +
      `\`${NIGHTLY}\` shared-prefix at ${ref.batchFloodRatePerS.toFixed(3)}/s (batch, ${s.batchObjectiveMs} ms, max_wait_ms ${s.batchMaxWaitMs}), ` +
      `\`${FREE}\` ${s.free.promptTokens}-token prompts at ${ref.freeRatePerS.toFixed(3)}/s against ${s.free.limitPerMin} prompt tokens/min. ` +
      `Each tenant a Kong consumer (key-auth); one fresh stack per arm (3 emulated pods, collector, Redis, one Kong node); ` +
      `windows ${s.windows.warmupS}/${s.windows.measureS}/${s.windows.cooldownS} s, the measure window on whole UTC minutes. ` +
      `random: the client picks the pod (the DES arm's seeded stream) and sends through the gateway's route to it; ` +
      `Kong rate limit: the open-source rate-limiting plugin on each consumer (minute, policy redis): ${Object.entries(
        ref.requestLimits,
      )
        .map(([k, v]) => `${k} ${v}/min`)
        .join(', ')}. Plugin settings beside the defaults: ${JSON.stringify(r.pluginSettings)}.`,
    '',
    `Chat alone, live: random p95 ${fmt(solo.random?.ttftP95Ms)} ms, goodput ${solo.random?.goodputPerMin.toFixed(1) ?? '–'}/min; ` +
      `kinference p95 ${fmt(solo.kinference?.ttftP95Ms)} ms, goodput ${solo.kinference?.goodputPerMin.toFixed(1) ?? '–'}/min ` +
      `(DES: ${fmt(ref.chatSolo.random.ttftP95Ms)} ms, ${ref.chatSolo.random.goodputPerMin.toFixed(1)}/min; ${fmt(ref.chatSolo.kinference.ttftP95Ms)} ms, ${ref.chatSolo.kinference.goodputPerMin.toFixed(1)}/min). ` +
      `Capacity left for the batch: the DES's ${ref.batchLeftPerMin.toFixed(1)}/min.`,
    '',
    ...(r.note ? [`Note: ${r.note}.`, ''] : []),
    'Each cell: DES → live.',
    '',
    '| arm | chat TTFT p95 (ms) | chat goodput vs solo (≥ 95%) | batch goodput vs left (≥ 80%) | free accepted prompt tok/min vs limit (±2%) | 429s chat / batch / free (live) | load (1 min) after |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const a of r.arms) {
    const d = r.des.find((x) => x.arm === a.arm);
    const free = (row: ArmRow): string =>
      `${row.goals.freeAcceptedVsLimit.map(pc).join(' / ')} ${ok(freeOk(row.goals.freeAcceptedVsLimit))}`;
    const cell = (desText: string, liveText: string): string => (d ? `${desText} → ${liveText}` : liveText);
    lines.push(
      `| ${a.arm} | ${cell(`${fmt(d?.chat.ttftP95Ms)} ${ok(d?.goals.chatP95WithinObjective ?? false)}`, `**${fmt(a.chat.ttftP95Ms)}** ${ok(a.goals.chatP95WithinObjective)}`)} ` +
        `| ${cell(`${pc(d?.goals.chatGoodputVsSolo ?? 0)} ${ok((d?.goals.chatGoodputVsSolo ?? 0) >= 0.95)}`, `**${pc(a.goals.chatGoodputVsSolo)}** (${a.chat.goodputPerMin.toFixed(1)}/min) ${ok(a.goals.chatGoodputVsSolo >= 0.95)}`)} ` +
        `| ${cell(`${pc(d?.goals.batchGoodputVsLeft ?? 0)} ${ok((d?.goals.batchGoodputVsLeft ?? 0) >= 0.8)}`, `**${pc(a.goals.batchGoodputVsLeft)}** (${a.nightly.goodputPerMin.toFixed(1)}/min) ${ok(a.goals.batchGoodputVsLeft >= 0.8)}`)} ` +
        `| ${cell(d ? free(d) : '', `**${a.free.acceptedPromptTokensPerMin.join(' / ')}** (${free(a)})`)} ` +
        `| ${refusedN(a.chat)} / ${refusedN(a.nightly)} / ${refusedN(a.free)} | ${a.run.loadAvg.after[0]} |`,
    );
  }
  const uncounted = r.arms.reduce((x, a) => x + a.run.uncountedAdmissions, 0);
  lines.push('', `Requests the plugin admitted uncounted (a limit past its Redis budget): ${uncounted}.`);
  const pol = r.arms.find((a) => a.arm === 'kinference+policies');
  if (pol)
    lines.push(
      `kinference+policies, the limiter's own prompt counters in Redis per minute: ${JSON.stringify(pol.run.limiterPromptCounters)}.`,
    );
  if (r.limit) {
    const l = r.limit;
    lines.push(
      '',
      `## The limited tenant across ${l.nodes} Kong nodes`,
      '',
      `\`${FREE}\` alone, ${s.free.promptTokens}-token prompts at ${l.offeredPerS.toFixed(3)}/s (2× its limit), each request to the next of ${l.nodes} stand-in nodes ` +
        `(each its own plugin server, one Redis), kinference with the policies; ${l.windows.measureS / 60} whole UTC minutes after ${l.windows.warmupS} s. ` +
        `Load average after: ${l.run.loadAvg.after.join(' / ')}.`,
      '',
      "| minute | accepted prompt tokens (client, from usage) | vs limit | the limiter's counter in Redis | 429s in the run |",
      '|---|---|---|---|---|',
    );
    l.free.acceptedPromptTokensPerMin.forEach((n, i) =>
      lines.push(
        `| ${i + 1} | ${n} | ${pc(l.acceptedVsLimit[i]!)} ${ok(Math.abs(l.acceptedVsLimit[i]! - 1) <= 0.02)} | ${l.limiterCounters[i] ?? '–'} | ${i === 0 ? refusedN(l.free) : ''} |`,
      ),
    );
    lines.push('', `Admitted uncounted: ${l.run.uncountedAdmissions}.`);
  }
  lines.push('');
  return lines.join('\n');
}
