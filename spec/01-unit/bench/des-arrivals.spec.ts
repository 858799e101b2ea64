import { describe, expect, it } from 'vitest';
import type { Arm } from '../../../bench/lib/arms/types.js';
import { cellEnvironment, simPods } from '../../../bench/lib/des/cell-setup.js';
import { runCell } from '../../../bench/lib/des/run-cell.js';
import { fleetOf } from '../../../bench/lib/des/fleet.js';
import { loadModelSetup } from '../../../bench/lib/setup.js';
import { SMOKE_SCHEDULE } from '../../../bench/lib/schedule.js';
import type { Profile } from '../../../bench/lib/types.js';
import { guidellmPoissonSlots } from '../../../bench/lib/workload/arrivals.js';
import { WorkloadFactory } from '../../../bench/lib/workload/workloads.js';

describe('discrete-event runner: GuideLLM worker-process arrivals', () => {
  it(
    'sends at the GuideLLM slots, and each worker sends only its own conversations’ follow-ups',
    { timeout: 60_000 },
    async () => {
      const s = SMOKE_SCHEDULE;
      const m = await loadModelSetup();
      const fleet = fleetOf(s, m);
      const arm: Arm = { name: 'random', choose: () => ({ podId: 'pod-1' }) };
      const profile: Profile = {
        kind: 'poisson',
        rate: 0.5,
        warmupS: 0,
        measureS: 60,
        cooldownS: 0,
        arrivals: 'guidellm',
        clientWorkers: 4,
      };
      const r = await runCell({
        arm,
        factory: new WorkloadFactory('multiturn', s.shapes, m.synth, s.seed, 1),
        profile,
        pods: simPods(fleet, s.seed, 1),
        ...cellEnvironment(m, fleet),
        seed: s.seed,
        trial: 1,
        feed: null,
        trackBlockHashes: false,
      });
      const slots = guidellmPoissonSlots({ ratePerS: 0.5, durationMs: 60_000, workers: 4, seed: s.seed + 1 });
      expect(r.records.map((x) => x.startMs)).toEqual(slots.map((x) => x.atMs));
      // Slot k belongs to worker slots[k].worker; a conversation's turns all come from one worker.
      const ownerOf = new Map<string, number>();
      r.records.forEach((rec, k) => {
        const w = slots[k]!.worker;
        if (rec.turnIndex === 0) ownerOf.set(rec.conversationId, w);
        else expect(ownerOf.get(rec.conversationId)).toBe(w);
      });
      expect(r.records.some((x) => x.turnIndex > 0)).toBe(true);
    },
  );
});
