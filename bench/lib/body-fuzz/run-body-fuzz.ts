// runBodyFuzz: seeded bodies through the stand-in + plugin server and straight to a pod, compared, measured.
import {
  BODY_CLASSES,
  RARE_CLASSES,
  fuzzCase,
  rareClassAt,
  type BodyClass,
  type CaseOptions,
  type FuzzCase,
} from './bodies.js';
import { cpuNsOf, loopCpuNsOf, mib, quiesce, rssOf } from './process-cpu.js';
import {
  FUZZ_MODEL,
  pluginPid,
  sampleFrom,
  send,
  startStack,
  stateDump,
  withoutGatewayOwned,
  type Answer,
  type MemorySample,
} from './stack.js';
import { defaultPluginsDir } from '../../../kong/stand-in/index.js';

export { FUZZ_MODEL, type MemorySample };

/**
 * The body fuzz (issue #36, #33 item 2): seeded chat bodies, good and bad, each sent straight to an emulated
 * vLLM pod and through the Kong stand-in running the real kinference plugin in the real plugin server, which
 * routes to that pod. The gateway must answer every body with the pod's status (no plugin-caused 5xx), never
 * hang, and its plugin server must not crash; its CPU per request and memory (RSS, heap, after a forced GC)
 * are measured.
 *
 * Several clients at once (`concurrency`), as Kong's workers hold several connections to the plugin server.
 * A case's CPU is the plugin server's CPU (all threads) from its send until its answer: exact for a case run
 * alone, an upper bound when others overlap it (their CPU counts too). The multi-megabyte classes
 * (RARE_CLASSES) always run alone: their figures are exact, and the worst case is one of them or a bound.
 */

export interface BodyFuzzOptions {
  bodies: number;
  seed: number;
  /** Directory of the built plugin (default dist/plugins/kinference). */
  pluginsDir?: string;
  /** Cases that are valid bodies, sent first to warm the plugin up (default 20). */
  warmup?: number;
  /** Every class once, in order, before the random cases (the CI spec's coverage). */
  everyClassFirst?: boolean;
  caseOptions?: Partial<Omit<CaseOptions, 'model'>>;
  /** Clients sending at once (default 1); the rare classes always go alone. */
  concurrency?: number;
  /**
   * Wait after warm-up until the plugin server is idle (default true): its decision workers warm the
   * tokenizer up in the background for seconds, CPU the first slow cases would otherwise be billed.
   */
  quiesce?: boolean;
  /** Extra environment of the plugin server (e.g. MALLOC_ARENA_MAX, to tell allocator retention apart). */
  pluginServerEnv?: Record<string, string>;
  /** Per request; longer counts as a hang. */
  timeoutMs?: number;
  /** Wall time after which no new case starts (a long run on a busy machine): the report says so. */
  maxSeconds?: number;
  onProgress?: (done: number, total: number) => void;
  /** Every case as it was answered, with the plugin server's RSS after it (investigations). */
  onCase?: (
    c: FuzzCase,
    r: { gateway: Answer['status']; direct: Answer['status']; cpuMs: number; rssMiB: number },
  ) => void;
}

export interface Mismatch {
  index: number;
  cls: BodyClass;
  gateway: number | 'hang' | 'error';
  direct: number | 'hang' | 'error';
  bytes: number;
}

/** One class's figures: CPU per request (ms, mean and worst: exact when run alone, else an upper bound). */
export interface ClassCpu {
  n: number;
  alone: boolean;
  meanCpuMs: number;
  maxCpuMs: number;
  /** The event loop's share of the worst (the main thread's CPU over the same case). */
  maxLoopMs: number;
  maxBytes: number;
  maxWallMs: number;
}

export interface Worst {
  ms: number;
  index: number;
  cls: BodyClass;
  bytes: number;
  /** Measured with no other request in flight (exact), or an upper bound (others overlapped it). */
  alone: boolean;
}

export interface BodyFuzzReport {
  seed: number;
  bodies: number;
  concurrency: number;
  rareEvery: number | null;
  byClass: Record<string, number>;
  /** Gateway status → count. */
  statuses: Record<string, number>;
  mismatches: Mismatch[];
  hangs: number;
  /** Errors the gateway logged (a lost log phase, a PDK error…): first lines, and how many in all. */
  gatewayErrors: { count: number; first: string[] };
  pluginServerSpawns: number;
  /** Seconds waited after warm-up until the plugin server's background tokenizer warm-up was over. */
  quiesceS: number;
  /** Worst CPU per request of the plugin server (all threads), and of its event loop alone. */
  worstCpuMs: Worst;
  worstLoopCpuMs: Worst;
  /** Worst among the cases run alone (exact): the bound to quote. */
  worstAloneCpuMs: Worst;
  worstWallMs: { ms: number; index: number; cls: BodyClass };
  /** The plugin server's CPU over all cases / cases (ms): what a body costs on average, exact. */
  meanCpuMs: number;
  cpuByClass: Record<string, ClassCpu>;
  memory: {
    start: MemorySample;
    afterWarmup: MemorySample;
    afterRun: MemorySample;
    /** Highest RSS seen after a case, and the case. */
    peak: MemorySample & { index: number; cls: BodyClass };
    /** After a full GC in the plugin server: what is retained, the rest is heap V8 keeps. */
    afterGc: MemorySample;
  };
  /** What the plugin held at the end (its KINFERENCE_DEBUG_STATE dump). */
  pluginState: Record<string, unknown>;
  durationS: number;
  /** Cases not sent because maxSeconds was reached (0: the run is complete). */
  notSent: number;
}

const round1 = (x: number): number => Math.round(x * 10) / 10;

export async function runBodyFuzz(options: BodyFuzzOptions): Promise<BodyFuzzReport> {
  const t0 = Date.now();
  const caseOptions: CaseOptions = {
    model: FUZZ_MODEL,
    maxStringBytes: 10 * 1024 * 1024,
    manyMessages: 100_000,
    maxDepth: 100_000,
    ...options.caseOptions,
  };
  const timeoutMs = options.timeoutMs ?? 120_000;
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const stack = await startStack(options.pluginsDir ?? defaultPluginsDir(), options.pluginServerEnv);
  const { gw } = stack;
  try {
    // The plugin server loads the plugin on its first event: RSS "at start" is after one request.
    const warm = options.warmup ?? 20;
    await send(gw.url, fuzzCase(options.seed, -1, caseOptions, 'valid'), timeoutMs);
    await gw.idle();
    const start: MemorySample = { rssMiB: mib(rssOf(pluginPid(gw))) };
    for (let i = 0; i < warm; i++) {
      const c = fuzzCase(options.seed, -2 - i, caseOptions, 'valid');
      const r = await send(gw.url, c, timeoutMs);
      await gw.idle();
      options.onCase?.(c, {
        gateway: r.status,
        direct: r.status,
        cpuMs: 0,
        rssMiB: mib(rssOf(pluginPid(gw))),
      });
    }
    const quiesceS = options.quiesce === false ? 0 : await quiesce(pluginPid(gw));
    const afterWarmup: MemorySample = { rssMiB: mib(rssOf(pluginPid(gw))) };

    const noWorst: Worst = { ms: 0, index: -1, cls: 'valid', bytes: 0, alone: true };
    const report: BodyFuzzReport = {
      seed: options.seed,
      bodies: 0,
      concurrency,
      rareEvery: caseOptions.rareEvery ?? null,
      byClass: Object.fromEntries(BODY_CLASSES.map((c) => [c, 0])),
      statuses: {},
      mismatches: [],
      hangs: 0,
      gatewayErrors: stack.errors,
      pluginServerSpawns: 0,
      quiesceS,
      worstCpuMs: noWorst,
      worstLoopCpuMs: noWorst,
      worstAloneCpuMs: noWorst,
      worstWallMs: { ms: 0, index: -1, cls: 'valid' },
      meanCpuMs: 0,
      cpuByClass: {},
      memory: {
        start,
        afterWarmup,
        afterRun: start,
        afterGc: start,
        peak: { ...afterWarmup, index: -1, cls: 'valid' },
      },
      pluginState: {},
      durationS: 0,
      notSent: 0,
    };
    const stopAt = options.maxSeconds ? t0 + options.maxSeconds * 1000 : Infinity;
    const sums: Record<string, number> = {};
    const forced = options.everyClassFirst ? BODY_CLASSES.length : 0;
    const total = forced + options.bodies;
    const caseAt = (i: number): FuzzCase =>
      fuzzCase(
        options.seed,
        i,
        caseOptions,
        i < forced ? BODY_CLASSES[i] : rareClassAt(i - forced, caseOptions.rareEvery),
      );
    let done = 0;
    const cpuStart = cpuNsOf(pluginPid(gw));

    const runOne = async (c: FuzzCase, alone: boolean): Promise<void> => {
      const pid = pluginPid(gw);
      const cpu0 = cpuNsOf(pid);
      const loop0 = loopCpuNsOf(pid);
      const viaGw = await send(gw.url, c, timeoutMs);
      // Alone, the log phase's CPU belongs to the request too; with others in flight it lands in some window.
      if (alone) await gw.idle();
      let cpuMs = 0;
      let loopMs = 0;
      try {
        cpuMs = (cpuNsOf(pid) - cpu0) / 1e6;
        loopMs = (loopCpuNsOf(pid) - loop0) / 1e6;
      } catch {
        // the plugin server died on this body: counted as a respawn below; wait for the new one
        await gw.pluginServersReady(30_000);
      }
      // The gateway clears client-sent x-data-parallel-rank / x-kinference-* (docs/security.md): the pod
      // answers the request as the gateway forwards it.
      const direct = await send(stack.podUrl, withoutGatewayOwned(c), timeoutMs);
      record(c, viaGw, direct, cpuMs, loopMs, alone);
    };

    const record = (
      c: FuzzCase,
      viaGw: Answer,
      direct: Answer,
      cpuMs: number,
      loopMs: number,
      alone: boolean,
    ): void => {
      report.bodies++;
      report.byClass[c.cls] = (report.byClass[c.cls] ?? 0) + 1;
      report.statuses[String(viaGw.status)] = (report.statuses[String(viaGw.status)] ?? 0) + 1;
      if (viaGw.status === 'hang') report.hangs++;
      if (viaGw.status !== direct.status)
        report.mismatches.push({
          index: c.index,
          cls: c.cls,
          gateway: viaGw.status,
          direct: direct.status,
          bytes: c.body.length,
        });
      const w: Worst = { ms: round1(cpuMs), index: c.index, cls: c.cls, bytes: c.body.length, alone };
      if (cpuMs > report.worstCpuMs.ms) report.worstCpuMs = w;
      if (alone && cpuMs > report.worstAloneCpuMs.ms) report.worstAloneCpuMs = w;
      if (loopMs > report.worstLoopCpuMs.ms) report.worstLoopCpuMs = { ...w, ms: round1(loopMs) };
      if (viaGw.ms > report.worstWallMs.ms)
        report.worstWallMs = { ms: Math.round(viaGw.ms), index: c.index, cls: c.cls };
      const k = report.cpuByClass[c.cls] ?? {
        n: 0,
        alone,
        meanCpuMs: 0,
        maxCpuMs: 0,
        maxLoopMs: 0,
        maxBytes: 0,
        maxWallMs: 0,
      };
      k.n++;
      k.alone &&= alone;
      sums[c.cls] = (sums[c.cls] ?? 0) + cpuMs;
      k.meanCpuMs = round1(sums[c.cls]! / k.n);
      if (cpuMs > k.maxCpuMs) [k.maxCpuMs, k.maxLoopMs] = [round1(cpuMs), round1(loopMs)];
      k.maxBytes = Math.max(k.maxBytes, c.body.length);
      k.maxWallMs = Math.max(k.maxWallMs, Math.round(viaGw.ms));
      report.cpuByClass[c.cls] = k;
      options.onProgress?.(++done, total);
      const rssMiB = mib(rssOf(pluginPid(gw)));
      if (rssMiB > report.memory.peak.rssMiB) report.memory.peak = { rssMiB, index: c.index, cls: c.cls };
      options.onCase?.(c, { gateway: viaGw.status, direct: direct.status, cpuMs, rssMiB });
    };

    // Cases in order; common ones by up to `concurrency` clients, a rare one after the others finished, alone.
    const running = new Set<Promise<void>>();
    for (let i = 0; i < total; i++) {
      if (Date.now() > stopAt) {
        report.notSent = total - i;
        break;
      }
      const c = caseAt(i);
      const alone = concurrency === 1 || RARE_CLASSES.includes(c.cls);
      if (alone) {
        await Promise.all(running);
        await gw.idle();
        await runOne(c, true);
        continue;
      }
      while (running.size >= concurrency) await Promise.race(running);
      const p: Promise<void> = runOne(c, false).finally(() => running.delete(p));
      running.add(p);
    }
    await Promise.all(running);
    await gw.idle();
    report.meanCpuMs = round1((cpuNsOf(pluginPid(gw)) - cpuStart) / 1e6 / Math.max(1, report.bodies));
    report.memory.afterRun = { rssMiB: mib(rssOf(pluginPid(gw))) };
    const dump = await stateDump(gw, stack.stateFile);
    report.memory.afterGc = sampleFrom(dump);
    report.pluginState = { pending: dump.pending, routers: dump.routers, logOnceKeys: dump.logOnceKeys };
    report.pluginServerSpawns = gw.plugins.get('kinference')!.server.spawns;
    report.durationS = Math.round((Date.now() - t0) / 100) / 10;
    return report;
  } finally {
    await stack.close();
  }
}
