// Probe: times one mixed arm run in virtual time (development aid for bench:mixed).
import { loadModelSetup } from '../lib/setup.js';
import { SEED_SCHEDULE } from '../lib/schedule.js';
import { fleetOf } from '../lib/des/fleet.js';
import { sloFor } from '../lib/slo.js';
import { MIXED_SCENARIO, runMixedArm, tenantSources, type MixedArmName } from '../lib/mixed/scenario.js';
import { tenantFigures } from '../lib/mixed/tenant-metrics.js';

const m = await loadModelSetup();
const fleet = fleetOf(SEED_SCHEDULE, m);
const slo = sloFor(SEED_SCHEDULE, m);
console.log('slo', JSON.stringify(slo));
const s = { ...MIXED_SCENARIO, chatObjectiveMs: slo.multiturn.ttftMs, windows: { warmupS: 20, measureS: 60, cooldownS: 5 } };
const arm = (process.argv[2] ?? 'kinference') as MixedArmName;
const load = JSON.parse(process.argv[3] ?? '{"chat":0.3,"nightly":{"streams":16},"free":null}');
const t0 = Date.now();
const r = await runMixedArm({ arm, scenario: s, tenants: tenantSources(s, m, load), fleet, model: m });
console.log('wall', Date.now() - t0, 'records', r.records.length);
for (const t of ['chat', 'nightly', 'free']) console.log(t, JSON.stringify(tenantFigures(r, t, t === 'nightly' ? { ttftMs: s.batchObjectiveMs, itlMs: 100, basis: '' } : slo.multiturn)));
