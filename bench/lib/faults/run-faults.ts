// Runs the faults one at a time under sustained traffic, and the soak; returns the figures for the report.
import { FAULTS, type FaultName } from './faults.js';
import { figures, qualityBackAt, slope, type FaultFigures } from './measure.js';
import { FaultStack, type FaultStackOptions } from './stack.js';
import { Traffic, type TrafficOptions } from './traffic.js';

export interface FaultRunOptions {
  stack: Omit<FaultStackOptions, 'model'> & { model: FaultStackOptions['model'] };
  traffic: Omit<TrafficOptions, 'url' | 'model'>;
  faults: readonly FaultName[];
  /** Requests the traffic completes before the first fault (caches and calibration settle). */
  warmupRequests: number;
  baselineS: number;
  holdS: number;
  /** Give up waiting for the cache share to come back after this long (recoveryS null). */
  maxRecoveryS: number;
  /** Consecutive requests whose cached share must reach 90% of the baseline's. */
  qualityRun: number;
  soak?: { seconds: number; everyS: number; sampleS: number; faults: readonly FaultName[] };
  log?: (line: string) => void;
}

export interface MemorySample {
  atS: number;
  pluginServer: {
    rssMiB: number;
    heapUsedMiB: number;
    /** The decision workers' own heaps, summed (null: none answered, or no workers). */
    workersHeapMiB: number | null;
    /** What the decision workers' segment caches hold, summed (their byte count; bounded by the pool's budget). */
    workersSegmentCacheMiB: number | null;
    pid: number | null;
  };
  collector: { rssMiB: number; heapUsedMiB: number };
  standIn: { rssMiB: number; heapUsedMiB: number };
  redis: { usedMiB: number; keys: number };
}

export interface SoakReport {
  seconds: number;
  requests: number;
  failed: number;
  /** Failed requests that started while no fault was on (nothing may be lost there). */
  failedOutsideFaults: number;
  faultsInjected: { fault: FaultName; atS: number; failed: number }[];
  samples: MemorySample[];
  /** MiB per minute over the samples after the first fifth (warm-up), least squares. */
  slopesMiBPerMin: Record<string, number>;
  /** Access events the stand-in ran whose log phase never ran, and plugin decisions still pending after idle. */
  leaked: { accessWithoutLog: number; pendingDecisions: unknown; failedOpenEvents: number };
}

export interface FaultsReport {
  startedAt: string;
  durationS: number;
  options: Omit<FaultRunOptions, 'log'>;
  faults: FaultFigures[];
  soak: SoakReport | null;
}

const MiB = 1 << 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const r1 = (x: number) => Math.round(x * 10) / 10;

function promValue(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

type DumpedWorker = { heapUsedBytes?: number | null; segmentCaches?: { bytes: number }[] };

/** A figure of every decision worker in a state dump, MiB, summed (null: a worker did not answer with it). */
function workersSumMiB(workers: unknown, of: (w: DumpedWorker) => number | null | undefined): number | null {
  if (!Array.isArray(workers) || workers.length === 0) return null;
  const xs = (workers as DumpedWorker[]).map(of);
  return xs.every((b): b is number => typeof b === 'number') ? r1(xs.reduce((a, b) => a + b, 0) / MiB) : null;
}

async function sample(stack: FaultStack, t: Traffic): Promise<MemorySample> {
  const [dump, metrics, gw, redis] = await Promise.all([
    stack.pluginDump(),
    stack.collectorMetrics(),
    stack.gatewayStats(),
    stack.redisMemory(),
  ]);
  const mem = dump.memory as { rss: number; heapUsed: number };
  return {
    atS: r1(t.now() / 1000),
    pluginServer: {
      rssMiB: r1(mem.rss / MiB),
      heapUsedMiB: r1(mem.heapUsed / MiB),
      workersHeapMiB: workersSumMiB(dump.decisionWorkers, (w) => w.heapUsedBytes),
      // A worker that did not answer in time reports no segment caches at all.
      workersSegmentCacheMiB: workersSumMiB(dump.decisionWorkers, (w) =>
        w.segmentCaches?.length ? w.segmentCaches.reduce((a, c) => a + c.bytes, 0) : null,
      ),
      pid: gw.pluginServerPid,
    },
    collector: {
      rssMiB: r1(promValue(metrics, 'kinference_collector_process_resident_memory_bytes') / MiB),
      heapUsedMiB: r1(promValue(metrics, 'kinference_collector_nodejs_heap_size_used_bytes') / MiB),
    },
    standIn: { rssMiB: r1(gw.memory.rss / MiB), heapUsedMiB: r1(gw.memory.heapUsed / MiB) },
    redis: { usedMiB: r1(redis.usedBytes / MiB), keys: redis.keys },
  };
}

/**
 * Seconds from `fromMs` until the index holds ≥ 90% of `before` keys again (polled every 100 ms), null if not
 * within `maxS`.
 */
async function refill(
  stack: FaultStack,
  before: number,
  fromMs: number,
  t: Traffic,
  maxS: number,
): Promise<number | null> {
  while (t.now() < fromMs + maxS * 1000) {
    if ((await stack.indexKeys().catch(() => 0)) >= 0.9 * before)
      return Math.round((t.now() - fromMs) / 100) / 10;
    await sleep(100);
  }
  return null;
}

/** Injects one fault under the running traffic and measures it. */
async function runFault(
  stack: FaultStack,
  t: Traffic,
  name: FaultName,
  o: FaultRunOptions,
): Promise<FaultFigures> {
  const f = FAULTS[name];
  const log = o.log ?? (() => undefined);
  await sleep(o.baselineS * 1000);
  const before = await stack.gatewayStats();
  // Redis restarted empty: how long the collector takes to write the index back (no request needed).
  const keysBefore = f.losesIndex ? await stack.indexKeys() : 0;
  const injectMs = t.now();
  log(`fault ${name}: ${f.what}`);
  await f.inject(stack);
  await sleep(o.holdS * 1000);
  await f.recover(stack);
  const recoveredMs = t.now();
  const refilled = f.losesIndex ? refill(stack, keysBefore, recoveredMs, t, o.maxRecoveryS) : null;
  const base = t.records.filter((r) => r.startMs >= injectMs - o.baselineS * 1000 && r.startMs < injectMs);
  const ratio = (() => {
    let c = 0;
    let p = 0;
    for (const r of base)
      if (r.ok) {
        c += r.cachedTokens;
        p += r.promptTokens;
      }
    return p > 0 ? c / p : 0;
  })();
  const deadline = recoveredMs + o.maxRecoveryS * 1000;
  while (t.now() < deadline) {
    await t.settled(t.now());
    if (qualityBackAt(t.records, recoveredMs, 0.9 * ratio, o.qualityRun) !== null) break;
    await sleep(250);
  }
  const endMs = t.now();
  await t.settled(endMs);
  const indexRefillS = refilled ? await refilled : undefined;
  const after = await stack.gatewayStats();
  const fig = figures(
    name,
    t.records,
    { baselineFromMs: injectMs - o.baselineS * 1000, injectMs, recoveredMs, endMs },
    {
      kongStartInstance500: after.startInstanceErrors - before.startInstanceErrors,
      fallbacks: after.fallbackLines.slice(before.fallbackLines.length),
      qualityRun: o.qualityRun,
      access: { times: after.accessTimes, t0: t.t0 },
    },
  );
  if (indexRefillS !== undefined) fig.indexRefillS = indexRefillS;
  log(
    `  failed ${fig.failed}/${fig.requests} ${JSON.stringify(fig.failures)}, added p50 ${fig.addedP50Ms.toFixed(0)} ms p99 ${fig.addedP99Ms.toFixed(0)} ms, access phase p50/p99/max ${fig.access?.baseline.p50Ms.toFixed(1)}/${fig.access?.baseline.p99Ms.toFixed(1)}/${fig.access?.baseline.maxMs.toFixed(1)} → ${fig.access?.during.p50Ms.toFixed(1)}/${fig.access?.during.p99Ms.toFixed(1)}/${fig.access?.during.maxMs.toFixed(1)} ms (${fig.access?.during.requests}), lookup p99/max ${fig.access?.lookup.baseline.p99Ms.toFixed(1)}/${fig.access?.lookup.baseline.maxMs.toFixed(1)} → ${fig.access?.lookup.during.p99Ms.toFixed(1)}/${fig.access?.lookup.during.maxMs.toFixed(1)} ms, cache ${(fig.baseline.cacheRatio * 100).toFixed(0)}% → ${(fig.during.cacheRatio * 100).toFixed(0)}%, back in ${fig.recoveryS ?? '—'} s${indexRefillS !== undefined ? `, index refilled in ${indexRefillS ?? '—'} s` : ''}`,
  );
  return fig;
}

async function runSoak(
  stack: FaultStack,
  t: Traffic,
  s: NonNullable<FaultRunOptions['soak']>,
  o: FaultRunOptions,
): Promise<
  Omit<SoakReport, 'leaked' | 'requests' | 'failed' | 'failedOutsideFaults'> & {
    fromMs: number;
    faultWindows: [number, number][];
  }
> {
  const log = o.log ?? (() => undefined);
  const fromMs = t.now();
  const endMs = fromMs + s.seconds * 1000;
  const samples: MemorySample[] = [await sample(stack, t)];
  const faultsInjected: SoakReport['faultsInjected'] = [];
  const faultWindows: [number, number][] = [];
  let nextFault = fromMs + s.everyS * 1000;
  let nextSample = fromMs + s.sampleS * 1000;
  let k = 0;
  while (t.now() < endMs) {
    if (s.faults.length > 0 && t.now() >= nextFault && t.now() + o.holdS * 1000 < endMs) {
      const name = s.faults[k++ % s.faults.length]!;
      const at = t.now();
      await FAULTS[name].inject(stack);
      await sleep(o.holdS * 1000);
      await FAULTS[name].recover(stack);
      // Requests in the 10 s after the fault count as the fault's (reconnects, respawns).
      faultWindows.push([at, t.now() + 10_000]);
      faultsInjected.push({ fault: name, atS: r1((at - fromMs) / 1000), failed: 0 });
      log(`soak ${r1((at - fromMs) / 1000)} s: ${name}`);
      nextFault = t.now() + s.everyS * 1000;
    }
    if (t.now() >= nextSample) {
      samples.push(await sample(stack, t));
      const last = samples.at(-1)!;
      log(
        `soak ${r1((t.now() - fromMs) / 1000)} s: plugin ${last.pluginServer.rssMiB}/${last.pluginServer.heapUsedMiB} MiB (workers' heaps ${last.pluginServer.workersHeapMiB ?? '-'}, their segment caches ${last.pluginServer.workersSegmentCacheMiB ?? '-'}), collector ${last.collector.rssMiB}/${last.collector.heapUsedMiB}, stand-in ${last.standIn.rssMiB}/${last.standIn.heapUsedMiB}, redis ${last.redis.usedMiB} MiB ${last.redis.keys} keys`,
      );
      nextSample += s.sampleS * 1000;
    }
    await sleep(200);
  }
  samples.push(await sample(stack, t));
  const warm = samples.filter((x) => x.atS * 1000 >= fromMs + s.seconds * 200);
  // A sample without the figure (a decision worker that did not answer the dump) is left out, not read as 0.
  const perMin = (get: (x: MemorySample) => number | null) => {
    const points = warm.flatMap((x) => {
      const y = get(x);
      return y === null ? [] : [{ x: x.atS / 60, y }];
    });
    return Math.round(slope(points) * 100) / 100;
  };
  const slopesMiBPerMin = {
    'plugin server RSS': perMin((x) => x.pluginServer.rssMiB),
    'plugin server heap': perMin((x) => x.pluginServer.heapUsedMiB),
    'plugin decision workers heap': perMin((x) => x.pluginServer.workersHeapMiB),
    'plugin decision workers segment caches': perMin((x) => x.pluginServer.workersSegmentCacheMiB),
    'collector RSS': perMin((x) => x.collector.rssMiB),
    'collector heap': perMin((x) => x.collector.heapUsedMiB),
    'stand-in RSS': perMin((x) => x.standIn.rssMiB),
    'stand-in heap': perMin((x) => x.standIn.heapUsedMiB),
    'redis used memory': perMin((x) => x.redis.usedMiB),
  };
  for (const f of faultsInjected) {
    const w = faultWindows[faultsInjected.indexOf(f)]!;
    f.failed = t.records.filter((r) => !r.ok && r.endMs >= w[0] && r.startMs < w[1]).length;
  }
  return { seconds: s.seconds, faultsInjected, samples, slopesMiBPerMin, fromMs, faultWindows };
}

export async function runFaults(o: FaultRunOptions): Promise<FaultsReport> {
  const t0 = Date.now();
  const log = o.log ?? (() => undefined);
  log(`starting Redis, ${o.stack.pods} pods, collector, stand-in + plugin server…`);
  const stack = await FaultStack.start(o.stack);
  let traffic: Traffic | null = null;
  try {
    traffic = new Traffic({ ...o.traffic, url: stack.gatewayUrl, model: o.stack.model.name });
    const t = traffic;
    t.start();
    while (t.records.filter((r) => r.ok).length < o.warmupRequests) {
      if (t.records.length > 5 * o.warmupRequests)
        throw new Error(
          `warm-up: ${t.records.filter((r) => !r.ok).length} of ${t.records.length} requests failed: ${t.records.find((r) => !r.ok)?.error}`,
        );
      await sleep(200);
    }
    log(`warm-up done: ${t.records.length} requests`);
    const faults: FaultFigures[] = [];
    for (const name of o.faults) faults.push(await runFault(stack, t, name, o));
    let soak: SoakReport | null = null;
    if (o.soak) {
      const s = await runSoak(stack, t, o.soak, o);
      await t.stop();
      const rs = t.records.filter((r) => r.startMs >= s.fromMs);
      const inFault = (r: (typeof rs)[number]) =>
        s.faultWindows.some(([a, b]) => r.endMs >= a && r.startMs < b);
      const gw = await stack.gatewayStats();
      // After the traffic stopped, every access event's log phase has run (the stand-in waits for none).
      await sleep(1000);
      const gw2 = await stack.gatewayStats();
      const dump = await stack.pluginDump();
      soak = {
        seconds: s.seconds,
        requests: rs.length,
        failed: rs.filter((r) => !r.ok).length,
        failedOutsideFaults: rs.filter((r) => !r.ok && !inFault(r)).length,
        faultsInjected: s.faultsInjected,
        samples: s.samples,
        slopesMiBPerMin: s.slopesMiBPerMin,
        leaked: {
          accessWithoutLog: gw2.events.access - gw2.events.log,
          pendingDecisions: dump.pending,
          failedOpenEvents: gw.failedOpen,
        },
      };
    }
    return {
      startedAt: new Date(t0).toISOString(),
      durationS: Math.round((Date.now() - t0) / 1000),
      options: { ...o, log: undefined } as Omit<FaultRunOptions, 'log'>,
      faults,
      soak,
    };
  } finally {
    await traffic?.stop();
    await stack.stop();
  }
}
