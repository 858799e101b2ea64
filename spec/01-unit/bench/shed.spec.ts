import { describe, expect, it } from 'vitest';
import type { Arm } from '../../../bench/lib/arms/types.js';
import { cellEnvironment, simPods } from '../../../bench/lib/des/cell-setup.js';
import { runCell } from '../../../bench/lib/des/run-cell.js';
import { fleetOf } from '../../../bench/lib/des/fleet.js';
import { loadModelSetup } from '../../../bench/lib/setup.js';
import { SMOKE_SCHEDULE } from '../../../bench/lib/schedule.js';
import type { Profile } from '../../../bench/lib/types.js';
import { WorkloadFactory } from '../../../bench/lib/workload/workloads.js';

// kinference's opt-in shedding answers 429 + Retry-After from the gateway: in the discrete-event runner that
// is an errored request that never reaches a pod, and a closed-loop stream waits the Retry-After.
describe('discrete-event runner: a request the gateway rejects', () => {
  it(
    'is recorded as errored, reaches no pod, and its stream waits the Retry-After',
    { timeout: 60_000 },
    async () => {
      const s = SMOKE_SCHEDULE;
      const m = await loadModelSetup();
      const fleet = fleetOf(s, m);
      const pods = simPods(fleet, s.seed, 0);
      const rejectedAt: number[] = [];
      let n = 0;
      // Rejects every other request, 2 s Retry-After; the rest go to pod-0.
      const arm: Arm = {
        name: 'kinference',
        choose: (_req, _pods, nowMs) => {
          if (n++ % 2 === 0) {
            rejectedAt.push(nowMs);
            return { podId: '', rejected: { retryAfterMs: 2000 } };
          }
          return { podId: 'pod-0' };
        },
      };
      const profile: Profile = { kind: 'concurrent', streams: 1, warmupS: 0, measureS: 30, cooldownS: 0 };
      const r = await runCell({
        arm,
        factory: new WorkloadFactory('shared-prefix', s.shapes, m.synth, s.seed, 0),
        profile,
        pods,
        ...cellEnvironment(m, fleet),
        seed: s.seed,
        trial: 0,
        feed: null,
        trackBlockHashes: false,
      });
      const errored = r.records.filter((x) => x.status === 'errored');
      const served = r.records.filter((x) => x.status !== 'errored');
      expect(errored.length).toBeGreaterThan(0);
      expect(served.length).toBeGreaterThan(0);
      for (const e of errored) {
        expect(e.pod).toBe('');
        expect(e.firstTokenMs).toBeNull();
        // The next request of the (only) stream starts no earlier than the 429's end + Retry-After.
        const next = r.records.find((x) => x.startMs > e.startMs);
        if (next) expect(next.startMs).toBeGreaterThanOrEqual(e.endMs! + 2000);
      }
      expect(r.pods.map((p) => p.requests)).toEqual([served.length, 0, 0]);
    },
  );

  it(
    'with retry429, the client sends the same request again after the Retry-After, up to that many times',
    { timeout: 60_000 },
    async () => {
      const s = SMOKE_SCHEDULE;
      const m = await loadModelSetup();
      const fleet = fleetOf(s, m);
      const run = async (reject: (key: string, n: number) => boolean) => {
        let n = 0;
        const arm: Arm = {
          name: 'kinference',
          choose: (req) =>
            reject(req.key, n++) ? { podId: '', rejected: { retryAfterMs: 2000 } } : { podId: 'pod-0' },
        };
        const profile: Profile = {
          kind: 'concurrent',
          streams: 1,
          warmupS: 0,
          measureS: 30,
          cooldownS: 0,
          retry429: 2,
        };
        return (
          await runCell({
            arm,
            factory: new WorkloadFactory('shared-prefix', s.shapes, m.synth, s.seed, 0),
            profile,
            pods: simPods(fleet, s.seed, 0),
            ...cellEnvironment(m, fleet),
            seed: s.seed,
            trial: 0,
            feed: null,
            trackBlockHashes: false,
          })
        ).records;
      };
      // Every other first attempt rejected: each is retried once and served.
      const some = await run((key, n) => !key.includes('#retry') && n % 2 === 0);
      const rejected = some.filter((x) => x.status === 'errored');
      expect(rejected.length).toBeGreaterThan(1);
      for (const e of rejected) {
        const next = some.find((x) => x.startMs > e.startMs)!;
        if (!next) continue;
        expect(next).toMatchObject({
          conversationId: e.conversationId,
          turnIndex: e.turnIndex,
          key: `${e.key}#retry1`,
          attempt: 1,
          firstSentMs: e.startMs,
        });
        expect(next.startMs).toBeGreaterThanOrEqual(e.endMs! + 2000);
        expect(next.status).not.toBe('errored');
      }
      // Every attempt rejected: three tries of one request (the first and two retries), then the next one.
      const none = await run(() => true);
      expect(none.slice(0, 4).map((x) => [x.conversationId, x.attempt ?? 0])).toEqual([
        [none[0]!.conversationId, 0],
        [none[0]!.conversationId, 1],
        [none[0]!.conversationId, 2],
        [none[3]!.conversationId, 0],
      ]);
      expect(none[3]!.conversationId).not.toBe(none[0]!.conversationId);
    },
  );
});
