import { beforeAll, describe, expect, it } from 'vitest';
import { fleetOf } from '../../../bench/lib/des/fleet.js';
import type { MixedResult } from '../../../bench/lib/des/run-mixed.js';
import {
  CHAT,
  FREE,
  MIXED_SCENARIO,
  NIGHTLY,
  runMixedArm,
  tenantSources,
  type MixedArmName,
  type MixedScenario,
} from '../../../bench/lib/mixed/scenario.js';
import { acceptedPerMinute } from '../../../bench/lib/mixed/tenant-metrics.js';
import { SMOKE_SCHEDULE } from '../../../bench/lib/schedule.js';
import { loadModelSetup, type ModelSetup } from '../../../bench/lib/setup.js';

// bench:mixed's smoke variant: one virtual minute of the three tenants under three arms. It checks the
// mechanics the published figures rest on (who is refused by what, the limit held at admission), not figures.
const S: MixedScenario = {
  ...MIXED_SCENARIO,
  windows: { warmupS: 0, measureS: 60, cooldownS: 0 },
  chatObjectiveMs: 4000,
  free: { promptTokens: 500, outputTokens: 16, limitPerMin: 10_000, offerFactor: 2 },
};
const LOAD = { chat: 0.2, nightly: { ratePerS: 0.5 }, free: (2 * 10_000) / 500 / 60 };

let m: ModelSetup;
const runs = new Map<MixedArmName, MixedResult>();
async function run(arm: MixedArmName): Promise<MixedResult> {
  let r = runs.get(arm);
  if (!r) {
    r = await runMixedArm({
      arm,
      scenario: S,
      tenants: tenantSources(S, m, LOAD),
      fleet: fleetOf(SMOKE_SCHEDULE, m),
      model: m,
      requestLimits: { [FREE]: 20, [NIGHTLY]: 5 },
    });
    runs.set(arm, r);
  }
  return r;
}
const of = (r: MixedResult, t: string) => r.records.filter((x) => x.tenant === t);

beforeAll(async () => {
  m = await loadModelSetup();
});

describe('bench:mixed smoke: three tenants on one fleet in virtual time', () => {
  it(
    'kinference without policies refuses nobody: the limited tenant gets all it offers',
    { timeout: 60_000 },
    async () => {
      const r = await run('kinference');
      expect(r.records.every((x) => x.rejectedBy === null)).toBe(true);
      const [minute] = acceptedPerMinute(of(r, FREE), 0, 60_000);
      expect(minute).toBeGreaterThan(S.free.limitPerMin);
    },
  );

  it(
    'with policies the limited tenant is held at its prompt limit to within one request, at admission',
    { timeout: 60_000 },
    async () => {
      const r = await run('kinference+policies');
      const free = of(r, FREE);
      expect(free.some((x) => x.rejectedBy === 'limit')).toBe(true);
      const [minute] = acceptedPerMinute(free, 0, 60_000);
      const biggest = Math.max(...free.map((x) => x.promptTokens));
      expect(minute).toBeLessThanOrEqual(S.free.limitPerMin);
      expect(minute).toBeGreaterThan(S.free.limitPerMin - biggest);
      // The interactive tenant is never refused; only the batch (sheddable) class is shed by class.
      expect(of(r, CHAT).every((x) => x.rejectedBy === null)).toBe(true);
      for (const x of r.records) if (x.rejectedBy === 'class') expect(x.tenant).toBe(NIGHTLY);
      // Every refused request reached no pod; every forwarded one names its class admission.
      for (const x of r.records) {
        if (x.rejectedBy) expect(x.pod).toBe('');
        else expect(x.trace?.admission).not.toBeNull();
      }
      // The batch class waits its max_wait_ms for room before it is shed; only the batch class waits.
      for (const x of r.records)
        if (x.rejectedBy === 'class') expect(x.waitedMs).toBeCloseTo(S.batchMaxWaitMs, 6);
      for (const x of r.records) if (x.waitedMs > 0) expect(x.tenant).toBe(NIGHTLY);
    },
  );

  it(
    'a blocked batch request waits in the gateway (max_wait_ms), then is placed or shed; chat never waits',
    { timeout: 60_000 },
    async () => {
      // A heavier flood than the smoke's, with a short wait: some batch requests are blocked on every pod.
      const s: MixedScenario = { ...S, chatObjectiveMs: 1000, batchMaxWaitMs: 5000 };
      const r = await runMixedArm({
        arm: 'kinference+policies',
        scenario: s,
        tenants: tenantSources(s, m, { ...LOAD, nightly: { ratePerS: 2 } }),
        fleet: fleetOf(SMOKE_SCHEDULE, m),
        model: m,
      });
      const waited = of(r, NIGHTLY).filter((x) => x.waitedMs > 0);
      expect(waited.length).toBeGreaterThan(0);
      for (const x of waited) {
        expect(x.waitedMs).toBeLessThanOrEqual(s.batchMaxWaitMs + 1e-6); // virtual ms, summed floats
        // Placed once there was room (its TTFT counts the wait), or shed at its deadline, or still waiting.
        if (x.rejectedBy === 'class') expect(x.waitedMs).toBeCloseTo(s.batchMaxWaitMs, 6);
        else if (x.status === 'successful') expect(x.firstTokenMs! - x.startMs).toBeGreaterThan(x.waitedMs);
      }
      expect(of(r, CHAT).every((x) => x.waitedMs === 0 && x.rejectedBy === null)).toBe(true);
    },
  );

  it(
    "Kong's request-count limit refuses a consumer's requests past its count per clock minute",
    { timeout: 60_000 },
    async () => {
      const r = await run('kinference+kong-rate-limit');
      const free = of(r, FREE);
      expect(free.filter((x) => x.rejectedBy === null && x.startMs < 60_000)).toHaveLength(20);
      expect(free.some((x) => x.rejectedBy === 'request-limit')).toBe(true);
      expect(of(r, CHAT).every((x) => x.rejectedBy === null)).toBe(true);
    },
  );
});
