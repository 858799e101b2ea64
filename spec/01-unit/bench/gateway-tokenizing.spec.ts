import { describe, expect, it } from 'vitest';
import { runArmCell } from '../../../bench/lib/des/cell-setup.js';
import { fleetOf } from '../../../bench/lib/des/fleet.js';
import { loadModelSetup } from '../../../bench/lib/setup.js';
import { SMOKE_SCHEDULE } from '../../../bench/lib/schedule.js';
import type { Profile, RequestRecord } from '../../../bench/lib/types.js';

// bench:live's twin charges the plugin's tokenizing per token it did not find in its segment cache: a
// multiturn follow-up pays for its new messages only, as the live plugin does.
describe('discrete-event runner: the gateway path charges the tokens the plugin tokenized', () => {
  it(
    'charges a cold first turn in full and a follow-up only for its new text',
    { timeout: 120_000 },
    async () => {
      const s = SMOKE_SCHEDULE;
      const m = await loadModelSetup();
      const profile: Profile = { kind: 'concurrent', streams: 1, warmupS: 0, measureS: 40, cooldownS: 0 };
      const run = async (perTokenized: number): Promise<RequestRecord[]> => {
        const fleet = fleetOf(s, m);
        fleet.latency = { ...fleet.latency, requestOverheadMsPerTokenizedToken: perTokenized };
        const r = await runArmCell({
          arm: 'kinference',
          workload: 'multiturn',
          shapes: s.shapes,
          profile,
          fleet,
          model: m,
          seed: s.seed,
          trial: 0,
        });
        return r.records.filter((x) => x.status === 'successful');
      };
      const [base, charged] = [await run(0), await run(0.01)];
      const ttft = (r: RequestRecord): number => r.firstTokenMs! - r.startMs;
      const byKey = new Map(base.map((r) => [r.key, r]));
      const first = charged.find((r) => r.turnIndex === 0)!;
      const follow = charged.find((r) => r.turnIndex === 1)!;
      // One stream on idle pods: the extra TTFT is exactly the charged path.
      const extra = (r: RequestRecord): number => ttft(r) - ttft(byKey.get(r.key)!);
      expect(extra(first)).toBeCloseTo(0.01 * first.promptTokens, 0);
      const newTokens = follow.promptTokens - first.promptTokens;
      expect(extra(follow)).toBeGreaterThan(0);
      expect(extra(follow)).toBeLessThan(0.01 * (newTokens + 64));
    },
  );
});
