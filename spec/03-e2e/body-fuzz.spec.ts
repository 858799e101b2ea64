import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBodyFuzz } from '../../bench/lib/body-fuzz/run-body-fuzz.js';
import { BODY_CLASSES } from '../../bench/lib/body-fuzz/bodies.js';
import { buildPlugin, type BuiltPlugin } from '../02-integration/plugin/harness.js';

/**
 * The seeded body fuzz, short (issue #36; the long run is `npm run bench:fuzz:bodies`): every class of bad
 * body once and a few random cases, through the stand-in + the real plugin server to an emulated pod and
 * straight to the pod. The gateway answers each with the pod's status, never hangs, and its plugin server
 * neither crashes nor keeps a decision.
 */

let plugin: BuiltPlugin;

beforeAll(async () => {
  plugin = await buildPlugin();
}, 60_000);

afterAll(() => plugin?.cleanup());

describe('body fuzz (short, seeded)', () => {
  it('answers every body as the pod does, with no plugin-caused 5xx, hang or plugin-server crash', async () => {
    const report = await runBodyFuzz({
      bodies: 8,
      seed: 36,
      everyClassFirst: true,
      pluginsDir: plugin.dir,
      warmup: 2,
      // Two clients at once, as Kong's workers hold several connections; the multi-megabyte cases go alone.
      concurrency: 2,
      // CPU figures are not asserted here: no wait for the tokenizer's background warm-up.
      quiesce: false,
      timeoutMs: 60_000,
      caseOptions: { maxStringBytes: 1.5 * 1024 * 1024, manyMessages: 5000, maxDepth: 5000 },
    });
    expect(report.bodies).toBe(BODY_CLASSES.length + 8);
    expect(report.notSent).toBe(0);
    for (const c of BODY_CLASSES) expect(report.byClass[c]).toBeGreaterThan(0);
    expect(report.mismatches).toEqual([]);
    expect(report.hangs).toBe(0);
    // Every log phase ran: e.g. serialize() of a malformed query once threw and lost it (client still 200).
    expect(report.gatewayErrors).toEqual({ count: 0, first: [] });
    expect(report.pluginServerSpawns).toBe(1);
    expect(report.pluginState.pending).toMatchObject({ size: 0 });
  }, 180_000);
});
