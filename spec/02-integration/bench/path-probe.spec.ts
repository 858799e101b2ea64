import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fleetOf } from '../../../bench/lib/des/fleet.js';
import { idleUncachedTtftMs } from '../../../bench/lib/des/idle-ttft.js';
import { probePaths } from '../../../bench/lib/live/path-probe.js';
import { resetPodPrefixCache } from '../../../bench/lib/live/stack.js';
import { SEED_SCHEDULE } from '../../../bench/lib/schedule.js';
import { loadModelSetup, type ModelSetup } from '../../../bench/lib/setup.js';
import { MODEL, startTestFleet, type TestFleet } from '../emulator/emulator-fleet.js';

// bench:live runs its discrete-event twin with the path latency it measures on the live stack; that only
// makes sense if live TTFT minus the DES engine's own idle TTFT leaves just the HTTP/tokenizing path.
// The pod runs 10× slower than its profile: a loaded machine adds tens to hundreds of real ms to every
// request, which must stay small against the engine's time, the scale these bounds are in (at time scale 1
// it made the path look as long as a third of a 2k prefill).
const TIME_SCALE = 0.1;
describe('live path probe against a real emulator pod', () => {
  let fleet: TestFleet;
  let m: ModelSetup;
  beforeAll(async () => {
    const s = SEED_SCHEDULE;
    fleet = await startTestFleet(1, {
      profile: s.emulatorProfile,
      time_scale: TIME_SCALE,
      kv_capacity_tokens: s.kvCapacityTokens,
    });
    m = { ...(await loadModelSetup()), model: MODEL };
  }, 60_000);
  afterAll(async () => fleet?.close());

  const target = (): { host: string; port: number } => {
    const [host, port] = fleet.config.pods![0]!.address!.split(':') as [string, string];
    return { host, port: Number(port) };
  };
  /** Small probes (3 × 128 and 2,048 tokens) of the one pod. */
  const probe = (tokenizing?: { routes: ['pod0']; resetPrefixCaches: () => Promise<void> }) =>
    probePaths({
      targets: { pod0: target() },
      pod: fleetOf(SEED_SCHEDULE, m).pod,
      model: m,
      timeScale: TIME_SCALE,
      responseOverheadMs: 1,
      sizes: [128, 2048],
      repeats: 3,
      ...(tokenizing ? { tokenizing } : {}),
    });

  it('leaves a small, non-negative path once the engine time is taken out', { timeout: 90_000 }, async () => {
    const pod = fleetOf(SEED_SCHEDULE, m).pod;
    const { pod0: fit } = await probe();
    expect(fit.samples.map((x) => x.promptTokens)).toEqual([
      expect.toSatisfy((n: number) => n >= 128 && n < 150),
      expect.toSatisfy((n: number) => n >= 2048 && n < 2070),
    ]);
    const engine2k = idleUncachedTtftMs(pod, fit.samples[1]!.promptTokens);
    expect(engine2k).toBeGreaterThan(300); // a 2k prefill on this profile is hundreds of ms…
    for (const x of fit.samples) {
      expect(x.overheadMs).toBeGreaterThan(-5); // …and the live pod is not faster than its engine
      expect(x.overheadMs).toBeLessThan(0.25 * engine2k); // nor slower by more than an HTTP path
    }
    expect(fit.requestOverheadMs).toBeGreaterThanOrEqual(0);
    expect(fit.requestOverheadMsPerToken).toBeGreaterThanOrEqual(0);
  });

  it(
    'sends each prompt again after a prefix-cache reset; a route without a segment cache shows no tokenizing cost',
    { timeout: 90_000 },
    async () => {
      const pod = fleetOf(SEED_SCHEDULE, m).pod;
      await resetPodPrefixCache(target()); // the first test sent the same probe prompts
      // The reset is what keeps the repeat uncached: probePaths throws if a probe hits the cache.
      const { pod0: fit } = await probe({
        routes: ['pod0'],
        resetPrefixCaches: () => resetPodPrefixCache(target()),
      });
      for (const x of fit.samples) expect(x.warmOverheadMs).toBeTypeOf('number');
      const engine2k = idleUncachedTtftMs(pod, fit.samples[1]!.promptTokens);
      // The pod tokenizes every prompt in full both times: no share of the path is the plugin's.
      expect(fit.requestOverheadMsPerTokenizedToken * fit.samples[1]!.promptTokens).toBeLessThan(
        0.05 * engine2k,
      );
    },
  );
});
