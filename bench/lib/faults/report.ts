// bench/results/faults.md: the fault table and the soak's memory slopes, from a FaultsReport.
import type { FaultsReport } from './run-faults.js';
import { FAULTS } from './faults.js';

const ms = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${Math.round(x)} ms` : '—');
const ms1 = (x: number) => (Number.isFinite(x) ? `${x.toFixed(1)}` : '—');
const pct = (x: number) => (Number.isFinite(x) ? `${Math.round(x * 100)}%` : '—');

export function faultsMarkdown(r: FaultsReport, command: string): string {
  const o = r.options;
  const timeoutMs = Number(o.stack.pluginExtra?.redis_timeout_ms ?? 25);
  const out: string[] = [
    '# Faults under sustained traffic',
    '',
    `Command: \`${command}\` (${r.startedAt}, ${r.durationS} s). Stack: private redis-server, ${o.stack.pods} \`kinference emulator\` pods ` +
      `(one process each, time_scale ${o.stack.timeScale}, KV ${o.stack.kvCapacityTokens} tokens), \`kinference collector\`, ` +
      `the Kong stand-in with the real plugin server (plugin defaults: redis_timeout_ms ${timeoutMs}, expose_headers on for the route timings). Traffic: ${o.traffic.streams} closed-loop ` +
      `streams through the stand-in, every other request streamed, ${o.traffic.groups} shared system prompts of ~${o.traffic.prefixWords} words, ` +
      `max_tokens ${o.traffic.maxTokens}. Each fault: ${o.baselineS} s baseline, ${o.holdS} s of fault, then until ${o.qualityRun} ` +
      `consecutive requests get ≥ 90% of the baseline's cached prompt share (at most ${o.maxRecoveryS} s).`,
    '',
    '| fault | requests | failed | Kong 500 before an instance | added p50 / p99 during the fault (client) | access phase p50 / p99 / max before → during (plugin) | index lookup p99 / max before → during (bound: redis_timeout_ms) | cached share before → during | recovery (cache ≥ 90% of before) | fallback reasons logged |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const f of r.faults) {
    const failed =
      f.failed === 0
        ? '0'
        : `${f.failed} (${Object.entries(f.failures)
            .map(([k, v]) => `${k}: ${v}`)
            .join(', ')})`;
    const reasons =
      [...new Set(f.fallbacks.map((l) => /^fallback (\S+?),/.exec(l)?.[1] ?? l))].join(', ') || '—';
    const a = f.access;
    const access = a
      ? `${ms1(a.baseline.p50Ms)} / ${ms1(a.baseline.p99Ms)} / ${ms1(a.baseline.maxMs)} → ${ms1(a.during.p50Ms)} / ${ms1(a.during.p99Ms)} / ${ms1(a.during.maxMs)} (${a.during.requests} req)`
      : '—';
    const l = a?.lookup;
    const lookup = l
      ? `${ms1(l.baseline.p99Ms)} / ${ms1(l.baseline.maxMs)} → ${ms1(l.during.p99Ms)} / ${ms1(l.during.maxMs)} (${l.during.requests} req)`
      : '—';
    const recovery =
      (f.recoveryS === null ? `not within ${o.maxRecoveryS} s` : `${f.recoveryS.toFixed(1)} s`) +
      (f.indexRefillS === undefined
        ? ''
        : `; index ≥ 90% of its keys in ${f.indexRefillS === null ? `> ${o.maxRecoveryS}` : f.indexRefillS.toFixed(1)} s`);
    out.push(
      `| ${f.fault} | ${f.requests} | ${failed} | ${f.kongStartInstance500} | ${ms(f.addedP50Ms)} / ${ms(f.addedP99Ms)} | ${access} | ${lookup} | ${pct(f.baseline.cacheRatio)} → ${pct(f.during.cacheRatio)} | ${recovery} | ${reasons} |`,
    );
  }
  out.push(
    '',
    'The access phase is the time the stand-in waited for the plugin (RPC round trips included) on requests it ran, ' +
      "by when the phase ended; the client columns add the pods' queues. Both against the baseline window just before. " +
      `The index lookup is the plugin's own lookup step inside the access phase (x-kinference-route-timings): the part a Redis fault lengthens, cut at redis_timeout_ms (${timeoutMs} ms); what it shows past that is the plugin server's event loop answering the timer late.`,
    '',
    'Faults:',
    '',
  );
  for (const f of r.faults) out.push(`- **${f.fault}**: ${FAULTS[f.fault as keyof typeof FAULTS].what}.`);
  if (r.soak) {
    const s = r.soak;
    out.push(
      '',
      `## Soak: ${s.seconds} s`,
      '',
      `${s.requests} requests, ${s.failed} failed (${s.failedOutsideFaults} outside a fault and the 10 s after it). Faults injected: ` +
        (s.faultsInjected.map((f) => `${f.fault} at ${f.atS} s (${f.failed} failed)`).join(', ') || 'none') +
        '.',
      '',
      `Leaks: ${s.leaked.accessWithoutLog} access events without their log phase at the end, ${s.leaked.failedOpenEvents} events the stand-in abandoned over the whole run (failed open: requests passed through while the plugin server was down), plugin pending decisions ${JSON.stringify(s.leaked.pendingDecisions)}.`,
      '',
      '| series (after the first fifth) | slope, MiB/min | first → last sample |',
      '|---|---|---|',
    );
    const first = s.samples[0]!;
    const last = s.samples.at(-1)!;
    // A figure a sample lacks (a decision worker that did not answer the dump) shows as –, not 0.
    const ends: Record<string, [number | string, number | string]> = {
      'plugin server RSS': [first.pluginServer.rssMiB, last.pluginServer.rssMiB],
      'plugin server heap': [first.pluginServer.heapUsedMiB, last.pluginServer.heapUsedMiB],
      'plugin decision workers heap': [
        first.pluginServer.workersHeapMiB ?? '–',
        last.pluginServer.workersHeapMiB ?? '–',
      ],
      'plugin decision workers segment caches': [
        first.pluginServer.workersSegmentCacheMiB ?? '–',
        last.pluginServer.workersSegmentCacheMiB ?? '–',
      ],
      'collector RSS': [first.collector.rssMiB, last.collector.rssMiB],
      'collector heap': [first.collector.heapUsedMiB, last.collector.heapUsedMiB],
      'stand-in RSS': [first.standIn.rssMiB, last.standIn.rssMiB],
      'stand-in heap': [first.standIn.heapUsedMiB, last.standIn.heapUsedMiB],
      'redis used memory': [first.redis.usedMiB, last.redis.usedMiB],
    };
    for (const [k, v] of Object.entries(s.slopesMiBPerMin))
      out.push(`| ${k} | ${Math.round(v * 100) / 100} | ${ends[k]?.[0]} → ${ends[k]?.[1]} MiB |`);
    out.push(
      '',
      `Redis keys: ${first.redis.keys} → ${last.redis.keys}. Plugin-server heap is after a forced GC (KINFERENCE_DEBUG_STATE dump).`,
    );
  }
  return out.join('\n') + '\n';
}
