// Runs discrete-event cells, in this process or in a child process fed by the parent over IPC.
import { loadModelSetup, type ModelSetup } from '../setup.js';
import { sloFor } from '../slo.js';
import { fleetOf } from './fleet.js';
import type { BenchSchedule } from '../schedule.js';
import type { ArmName, Profile, RequestRecord, WorkloadName } from '../types.js';
import { runArmCell } from './cell-setup.js';

export interface CellSpec {
  id: number;
  workload: WorkloadName;
  profile: Profile;
  arm: ArmName;
  trial: number;
}

export interface CellOutput {
  spec: CellSpec;
  records: RequestRecord[];
  windowStartMs: number;
  windowEndMs: number;
  durationMs: number;
  wallMs: number;
  pods: { id: string; steps: number; busyMs: number; preemptions: number; requests: number }[];
  fallbacks: Record<string, number>;
  /** Kinference arm: blocks the collector path indexed / could not index, wire decode errors. */
  indexStats: Record<string, number>;
}

export async function runSpec(
  s: BenchSchedule,
  m: ModelSetup,
  c: CellSpec,
  onProgress?: (virtualMs: number) => void,
): Promise<CellOutput> {
  const r = await runArmCell({
    arm: c.arm,
    workload: c.workload,
    shapes: s.shapes,
    profile: c.profile,
    fleet: fleetOf(s, m),
    model: m,
    seed: s.seed,
    trial: c.trial,
    // Only the arm with admission control needs the SLO (computing it runs the idle engine).
    ...(c.arm === 'kinference-slo' ? { slo: sloFor(s, m)[c.workload] } : {}),
    ...(s.randomRouting ? { randomRouting: s.randomRouting } : {}),
    ...(s.collectorCalibration ? { collectorCalibration: true } : {}),
    ...(onProgress ? { onProgress } : {}),
  });
  return {
    spec: c,
    records: r.records,
    windowStartMs: r.windowStartMs,
    windowEndMs: r.windowEndMs,
    durationMs: r.durationMs,
    wallMs: r.wallMs,
    pods: r.pods,
    fallbacks: r.fallbacks ?? {},
    indexStats: r.indexStats ?? {},
  };
}

type Msg = { schedule: BenchSchedule; cell: CellSpec } | { exit: true };

/** Child-process side: loads the tokenizer once, then runs cells sent by the parent over IPC. */
if (process.send && process.argv.includes('--bench-worker')) {
  let model: Promise<ModelSetup> | null = null;
  // The parent is gone (killed, not interrupted): nobody to report to, so stop instead of dying on EPIPE.
  process.on('disconnect', () => process.exit(0));
  process.on('message', (msg: Msg) => {
    if ('exit' in msg) process.exit(0);
    model ??= loadModelSetup();
    void model
      .then((m) => runSpec(msg.schedule, m, msg.cell))
      .then(
        (out) => process.send!({ ok: true, out }),
        (e: unknown) =>
          process.send!({ ok: false, id: msg.cell.id, error: String((e as Error)?.stack ?? e) }),
      );
  });
}
