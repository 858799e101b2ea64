// Per-request trace of a mixed-tenant arm: admissions, waits, and the slow chat requests with their pods.
import { loadModelSetup } from '../lib/setup.js';
import { SEED_SCHEDULE } from '../lib/schedule.js';
import { fleetOf } from '../lib/des/fleet.js';
import { sloFor } from '../lib/slo.js';
import { MIXED_SCENARIO, runMixedArm, tenantSources, type MixedArmName } from '../lib/mixed/scenario.js';

const m = await loadModelSetup();
const fleet = fleetOf(SEED_SCHEDULE, m);
const slo = sloFor(SEED_SCHEDULE, m);
const s = {
  ...MIXED_SCENARIO,
  chatObjectiveMs: slo.multiturn.ttftMs,
  gateways: Number(process.env.GATEWAYS ?? 1),
  batchMaxWaitMs: Number(process.env.BATCH_WAIT_MS ?? MIXED_SCENARIO.batchMaxWaitMs),
  interactiveReservedPods: Number(process.env.RESERVED_PODS ?? MIXED_SCENARIO.interactiveReservedPods),
  seed: Number(process.env.SEED ?? MIXED_SCENARIO.seed),
};
const arm = (process.argv[2] ?? 'kinference+policies') as MixedArmName;
const flood = Number(process.argv[3] ?? 0.617);
const load = { chat: s.chatRatePerS, nightly: { ratePerS: flood }, free: (2 * 30000) / 500 / 60 };
const r = await runMixedArm({ arm, scenario: s, tenants: tenantSources(s, m, load), fleet, model: m });
const recs = r.records;
const ttft = (x: (typeof recs)[number]): number | null =>
  x.firstTokenMs === null ? null : x.firstTokenMs - x.startMs;
const adm = new Map<string, number>();
for (const x of recs) {
  const waited = x.waitedMs > 0 ? ` waited ${Math.round(x.waitedMs / 1000)} s` : '';
  const k = `${x.tenant} ${x.rejectedBy ?? 'sent'} ${x.trace?.admission ?? '-'}${waited}`;
  adm.set(k, (adm.get(k) ?? 0) + 1);
}
console.log(
  [...adm]
    .sort()
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n'),
);
const slow = recs.filter(
  (x) => x.tenant === 'chat' && (process.env.FIRST_TURNS === '1' || x.turnIndex > 0) && (ttft(x) ?? 0) > 600,
);
console.log(`slow chat: ${slow.length} of ${recs.filter((x) => x.tenant === 'chat').length}`);
for (const x of slow.slice(0, 12)) {
  const t = ttft(x)!;
  const others = recs.filter(
    (o) =>
      o !== x && o.pod === x.pod && o.startMs < x.startMs + t && (o.firstTokenMs ?? Infinity) > x.startMs - 0,
  );
  console.log(
    `${x.key} pod=${x.pod} start=${(x.startMs / 1000).toFixed(1)} ttft=${t.toFixed(0)} pred=${x.trace?.predictedTtftMs?.toFixed(0)} prompt=${x.promptTokens} cached=${x.cachedTokens} ${x.trace?.admission}`,
  );
  for (const o of others)
    console.log(
      `    ${o.tenant} ${o.key} start=${(o.startMs / 1000).toFixed(1)} ttft=${ttft(o)?.toFixed(0)} pred=${o.trace?.predictedTtftMs?.toFixed(0)} prompt=${o.promptTokens} cached=${o.cachedTokens} ${o.trace?.admission} ${o.trace?.detail?.slice(0, 120) ?? ''}`,
    );
}
const shedDetail = recs
  .filter((x) => x.rejectedBy === 'class')
  .slice(0, 5)
  .map((x) => x.trace?.detail);
console.log(shedDetail.join('\n'));

// POD_TIMELINE=1: per 10 s and pod, the requests placed there with their TTFT in s and h (a hit: at least half
// the prompt cached) or c (cold), x for no first token: where each tenant went and what it got.
if (process.env.POD_TIMELINE === '1') {
  const pods = [...new Set(recs.map((x) => x.pod).filter((p) => p !== ''))].sort();
  for (let t0 = 0; t0 * 1000 < r.windowEndMs; t0 += 10) {
    const cells = pods.map((pod) => {
      const placed = recs.filter(
        (x) =>
          x.pod === pod && x.rejectedBy === null && x.startMs >= t0 * 1000 && x.startMs < (t0 + 10) * 1000,
      );
      const of = (tenant: string): string =>
        placed
          .filter((x) => x.tenant === tenant)
          .map((x) => {
            const t = ttft(x);
            return t === null
              ? 'x'
              : `${(t / 1000).toFixed(1)}${x.cachedTokens > x.promptTokens / 2 ? 'h' : 'c'}`;
          })
          .join(',');
      return `${pod}: chat[${of('chat')}] batch[${of('nightly')}] free ${placed.filter((x) => x.tenant === 'free').length}`;
    });
    console.log(`${t0}s  ${cells.join(' | ')}`);
  }
}
