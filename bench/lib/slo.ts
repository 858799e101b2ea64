// The study's SLOs: idle uncached TTFT plus padding per workload, and an ITL bound.
import { fleetOf } from './des/fleet.js';
import { idleUncachedTtftMs } from './des/idle-ttft.js';
import type { BenchSchedule } from './schedule.js';
import type { ModelSetup } from './setup.js';
import type { Slo } from './stats/goodput.js';
import type { WorkloadName } from './types.js';
import type { WorkloadShapes } from './workload/workloads.js';

/** Content tokens of turn `turn`'s prompt (the history included; the chat template adds a handful). */
export function promptTokensOfTurn(sh: WorkloadShapes, w: WorkloadName, turn: number): number {
  switch (w) {
    case 'control':
      return sh.control.promptTokens;
    case 'shared-prefix':
      return sh['shared-prefix'].prefixTokens + sh['shared-prefix'].promptTokens;
    case 'multiturn': {
      const m = sh.multiturn;
      return m.firstPromptTokens + turn * (m.promptTokens + m.outputTokens);
    }
  }
}

/** Mean prompt tokens of a workload's requests, every turn of a conversation counted once. */
export function meanPromptTokens(sh: WorkloadShapes, w: WorkloadName): number {
  const turns = w === 'multiturn' ? sh.multiturn.turns : 1;
  let total = 0;
  for (let k = 0; k < turns; k++) total += promptTokensOfTurn(sh, w, k);
  return Math.round(total / turns);
}

/** The SLO as the study set it: idle uncached TTFT (measured on the emulator) plus padding, and an ITL bound. */
export function sloFor(s: BenchSchedule, m: ModelSetup): Record<WorkloadName, Slo> {
  const fleet = fleetOf(s, m);
  const out = {} as Record<WorkloadName, Slo>;
  for (const w of s.workloads) {
    const n = meanPromptTokens(s.shapes, w);
    const idle =
      idleUncachedTtftMs(fleet.pod, n) + s.latency.requestOverheadMs + s.latency.responseOverheadMs;
    out[w] = {
      ttftMs: Math.round(idle * (1 + s.slo.ttftPadding)),
      itlMs: s.slo.itlMs,
      basis: `idle uncached TTFT of a ${n.toLocaleString('en')}-token prompt (${(idle / 1000).toFixed(2)} s) + ${Math.round(s.slo.ttftPadding * 100)}%`,
    };
  }
  return out;
}
