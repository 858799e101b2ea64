// The mixed-tenant benchmark: solo references, the mix under five arms side by side, the goals checked.
import type { FleetSpec } from '../des/cell-setup.js';
import type { ModelSetup } from '../setup.js';
import type { Slo } from '../stats/goodput.js';
import {
  CHAT,
  FREE,
  MIXED_ARMS,
  NIGHTLY,
  runMixedArm,
  tenantSources,
  type MixedArmName,
  type MixedScenario,
  type RequestLimits,
} from './scenario.js';
import { busyShare, tenantFigures, tenantTtfts, type TenantFigures } from './tenant-metrics.js';

export interface ArmRow {
  arm: MixedArmName;
  chat: TenantFigures;
  nightly: TenantFigures;
  free: TenantFigures;
  goals: {
    /** Interactive TTFT p95 ≤ its objective. */
    chatP95WithinObjective: boolean;
    /** Interactive goodput / its solo goodput (same routing family), goal ≥ 0.95. */
    chatGoodputVsSolo: number;
    /** Batch goodput / capacity left, goal ≥ 0.8. */
    batchGoodputVsLeft: number;
    /** Worst whole minute's accepted prompt tokens / limit, goal within ±2 %. */
    freeAcceptedVsLimit: number[];
  };
  wallMs: number;
}

export interface MixedReport {
  scenario: MixedScenario;
  slo: { chat: Slo; batch: Slo; free: Slo };
  reference: {
    /** The interactive tenant alone, per routing family. */
    chatSolo: Record<'random' | 'kinference', TenantFigures>;
    /** Fleet busy share of the interactive tenant alone (kinference). */
    chatBusyShare: number;
    /** The batch tenant alone, closed loop (kinference), at its best concurrency: its capacity. */
    batchSolo: TenantFigures;
    /** The concurrency at which the batch tenant alone had its best goodput. */
    batchStreams: number;
    batchCapacityPerMin: number;
    /** Capacity left for batch: batchCapacityPerMin × (1 − chatBusyShare). */
    batchLeftPerMin: number;
    batchFloodRatePerS: number;
    freeRatePerS: number;
    requestLimits: RequestLimits;
  };
  arms: ArmRow[];
}

/** Runs the references and every arm; `log` gets a line per finished run. */
export async function mixedBench(o: {
  scenario: MixedScenario;
  fleet: FleetSpec;
  model: ModelSetup;
  chatSlo: Slo;
  arms?: MixedArmName[];
  log?: (line: string) => void;
  /** Gets each arm's chat TTFTs in the measure window (pooling over seeds needs them; the report keeps p95). */
  chatTtfts?: (arm: MixedArmName, ttftsMs: number[]) => void;
}): Promise<MixedReport> {
  const { scenario: s, fleet, model } = o;
  const log = o.log ?? (() => {});
  const chatSlo: Slo = { ...o.chatSlo, ttftMs: s.chatObjectiveMs };
  const batchSlo: Slo = { ttftMs: s.batchObjectiveMs, itlMs: s.itlMs, basis: 'the batch class objective' };
  const freeSlo: Slo = { ttftMs: 10_000, itlMs: s.itlMs, basis: 'the standard class objective' };
  const durationMs = (s.windows.warmupS + s.windows.measureS + s.windows.cooldownS) * 1000;
  const run = (arm: MixedArmName, load: Parameters<typeof tenantSources>[2], limits?: RequestLimits) =>
    runMixedArm({
      arm,
      scenario: s,
      tenants: tenantSources(s, model, load),
      fleet,
      model,
      ...(limits ? { requestLimits: limits } : {}),
    });

  const chatAlone = { chat: s.chatRatePerS, nightly: null, free: null };
  const soloK = await run('kinference', chatAlone);
  const soloR = await run('random', chatAlone);
  const chatBusyShare = busyShare(soloK, durationMs);
  log(
    `solo chat: kinference p95 ${fmt(tenantFigures(soloK, CHAT, chatSlo).ttftP95Ms)} ms, busy ${pc(chatBusyShare)}`,
  );
  let batchSolo: TenantFigures | null = null;
  let batchStreams = 0;
  for (const streams of s.batchCapacityStreams) {
    const f = tenantFigures(
      await run('kinference', { chat: null, nightly: { streams }, free: null }),
      NIGHTLY,
      batchSlo,
    );
    log(`solo batch at ${streams} streams: ${f.goodputPerMin.toFixed(1)}/min within its objective`);
    if (batchSolo === null || f.goodputPerMin > batchSolo.goodputPerMin)
      [batchSolo, batchStreams] = [f, streams];
  }
  if (batchSolo === null) throw new Error('bench:mixed: batchCapacityStreams is empty');
  const batchCapacityPerMin = batchSolo.goodputPerMin;
  const batchLeftPerMin = batchCapacityPerMin * (1 - chatBusyShare);
  const batchFloodRatePerS = (s.batchFloodFactor * batchCapacityPerMin) / 60;
  const freeRatePerS = (s.free.offerFactor * s.free.limitPerMin) / s.free.promptTokens / 60;
  log(
    `solo batch: ${batchCapacityPerMin.toFixed(1)}/min within its objective; left ${batchLeftPerMin.toFixed(1)}/min`,
  );
  // Kong's rate-limiting as a user would set it to protect the chat: the batch consumer gets the requests
  // per minute left for it, the limited consumer its token limit in requests of its (known) prompt size.
  const requestLimits: RequestLimits = {
    [NIGHTLY]: Math.max(1, Math.floor(batchLeftPerMin)),
    [FREE]: Math.max(1, Math.floor(s.free.limitPerMin / s.free.promptTokens)),
  };
  const mix = { chat: s.chatRatePerS, nightly: { ratePerS: batchFloodRatePerS }, free: freeRatePerS };
  const chatSolo = {
    random: tenantFigures(soloR, CHAT, chatSlo),
    kinference: tenantFigures(soloK, CHAT, chatSlo),
  };
  const rows: ArmRow[] = [];
  for (const arm of o.arms ?? MIXED_ARMS) {
    const r = await run(arm, mix, requestLimits);
    const chat = tenantFigures(r, CHAT, chatSlo);
    const nightly = tenantFigures(r, NIGHTLY, batchSlo);
    const free = tenantFigures(r, FREE, freeSlo);
    o.chatTtfts?.(arm, tenantTtfts(r, CHAT));
    const solo = chatSolo[arm.startsWith('random') ? 'random' : 'kinference'];
    const row: ArmRow = {
      arm,
      chat,
      nightly,
      free,
      goals: {
        chatP95WithinObjective: chat.ttftP95Ms !== null && chat.ttftP95Ms <= s.chatObjectiveMs,
        chatGoodputVsSolo: solo.goodputPerMin > 0 ? chat.goodputPerMin / solo.goodputPerMin : 0,
        batchGoodputVsLeft: batchLeftPerMin > 0 ? nightly.goodputPerMin / batchLeftPerMin : 0,
        freeAcceptedVsLimit: free.acceptedPromptTokensPerMin.map((n) => n / s.free.limitPerMin),
      },
      wallMs: r.wallMs,
    };
    rows.push(row);
    log(
      `${arm}: chat p95 ${fmt(chat.ttftP95Ms)} ms good ${pc(row.goals.chatGoodputVsSolo)} of solo; batch ${pc(row.goals.batchGoodputVsLeft)} of left; free ${row.goals.freeAcceptedVsLimit.map(pc).join(' / ')} of limit (${(r.wallMs / 1000).toFixed(0)} s)`,
    );
  }
  return {
    scenario: s,
    slo: { chat: chatSlo, batch: batchSlo, free: freeSlo },
    reference: {
      chatSolo,
      chatBusyShare,
      batchSolo,
      batchStreams,
      batchCapacityPerMin,
      batchLeftPerMin,
      batchFloodRatePerS,
      freeRatePerS,
      requestLimits,
    },
    arms: rows,
  };
}

const fmt = (x: number | null): string => (x === null ? '–' : x.toFixed(0));
const pc = (x: number): string => `${(x * 100).toFixed(1)}%`;

/** The side-by-side table of a report, as Markdown. */
export function mixedMarkdown(r: MixedReport, command: string): string {
  const ref = r.reference;
  const lines = [
    '# Mixed-tenant fleet (discrete-event, virtual time)',
    '',
    `Command: \`${command}\``,
    '',
    `Interactive \`${CHAT}\`: multiturn at ${r.scenario.chatRatePerS}/s, objective ${r.scenario.chatObjectiveMs.toFixed(0)} ms` +
      ` (${r.slo.chat.basis}). Batch \`${NIGHTLY}\`: shared-prefix open loop at ${ref.batchFloodRatePerS.toFixed(3)}/s` +
      ` = ${r.scenario.batchFloodFactor}× the fleet's solo capacity (${ref.batchCapacityPerMin.toFixed(1)}/min within` +
      ` ${r.scenario.batchObjectiveMs} ms, its best over ${r.scenario.batchCapacityStreams.join('/')} closed-loop streams: ${ref.batchStreams}). Limited \`${FREE}\`:` +
      ` ${r.scenario.free.promptTokens}-token prompts at ${ref.freeRatePerS.toFixed(3)}/s,` +
      ` ${r.scenario.free.offerFactor}× its limit of ${r.scenario.free.limitPerMin} prompt tokens per minute.`,
    '',
    `Capacity left for batch: ${ref.batchCapacityPerMin.toFixed(1)}/min × (1 − ${pc(ref.chatBusyShare)} fleet busy share of the chat alone) = ${ref.batchLeftPerMin.toFixed(1)}/min.` +
      ` Kong rate limits (requests per minute per consumer): ${Object.entries(ref.requestLimits)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}.`,
    `Chat alone: random p95 ${fmt(ref.chatSolo.random.ttftP95Ms)} ms, goodput ${ref.chatSolo.random.goodputPerMin.toFixed(1)}/min; kinference p95 ${fmt(ref.chatSolo.kinference.ttftP95Ms)} ms, goodput ${ref.chatSolo.kinference.goodputPerMin.toFixed(1)}/min.`,
    '',
    '| arm | chat TTFT p95 (ms) | chat goodput /min (vs solo, goal ≥ 95%) | chat 429 | batch goodput /min (vs left, goal ≥ 80%) | batch 429 | free accepted prompt tok/min (vs limit, goal ±2%) | free 429 |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const a of r.arms) {
    const ok = (b: boolean): string => (b ? '✓' : '✗');
    const refusedN = (f: TenantFigures): string =>
      String(Object.values(f.refused).reduce((x, y) => x + y, 0));
    const free = a.free.acceptedPromptTokensPerMin
      .map((n, i) => `${n} (${pc(a.goals.freeAcceptedVsLimit[i]!)})`)
      .join(' / ');
    const freeOk = a.goals.freeAcceptedVsLimit.every((x) => Math.abs(x - 1) <= 0.02);
    lines.push(
      `| ${a.arm} | ${fmt(a.chat.ttftP95Ms)} ${ok(a.goals.chatP95WithinObjective)} | ${a.chat.goodputPerMin.toFixed(1)} (${pc(a.goals.chatGoodputVsSolo)}) ${ok(a.goals.chatGoodputVsSolo >= 0.95)} | ${refusedN(a.chat)} | ${a.nightly.goodputPerMin.toFixed(1)} (${pc(a.goals.batchGoodputVsLeft)}) ${ok(a.goals.batchGoodputVsLeft >= 0.8)} | ${refusedN(a.nightly)} | ${free} ${ok(freeOk)} | ${refusedN(a.free)} |`,
    );
  }
  lines.push('');
  return lines.join('\n');
}
