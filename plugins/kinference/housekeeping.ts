// The plugin's housekeeping timer: drops per-request state whose log phase never came; the state dump.
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import {
  constants,
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
  type EventLoopUtilization,
} from 'node:perf_hooks';
import { routerStats, runningDecisionPool, sweepRouters } from '../../src/router/index.js';
import { logOnce, logOnceKeys } from './log-once.js';
import { PENDING_MAX_ENTRIES, type PendingDecisions } from './pending.js';

/**
 * Per-request state must not outlive its request when Kong never runs the log phase (a worker crash, a
 * plugin server restart): a timer, started with the first request, drops the decisions past their TTL (which
 * releases their reservations and ITL records) and every router's expired entries, also when no request
 * comes to do it, and reports the drops at most once per log interval (log-once.ts).
 */
export const SWEEP_EVERY_MS = 60_000;

let timer: NodeJS.Timeout | null = null;
let reported = { expired: 0, evicted: 0 };

/** One sweep; exported for the specs. */
export function sweepOnce(pending: PendingDecisions, nowMs: number = Date.now()): void {
  pending.sweep(nowMs);
  sweepRouters(nowMs);
  const s = pending.stats();
  const expired = s.expired - reported.expired;
  const evicted = s.evicted - reported.evicted;
  if (expired + evicted === 0) return;
  const ttlS = Math.round(pending.ttlMs / 1000);
  const emitted = logOnce(
    'pending-dropped',
    `${expired + evicted} decisions dropped without their log phase since the last report ` +
      `(${expired} past the ${ttlS} s TTL, ${evicted} over the ${PENDING_MAX_ENTRIES}-entry bound; ` +
      `since start: ${s.expired} expired, ${s.evicted} evicted); their reservations and ITL records were released`,
    nowMs,
  );
  if (emitted) reported = { expired: s.expired, evicted: s.evicted };
}

export function startHousekeeping(pending: PendingDecisions): void {
  if (timer) return;
  const every = Math.min(SWEEP_EVERY_MS, Math.max(100, Math.floor(pending.ttlMs / 4)));
  timer = setInterval(() => {
    // A throw from a timer would end the plugin server, and every request on the node with it.
    try {
      sweepOnce(pending);
    } catch (e) {
      logOnce('housekeeping', `housekeeping sweep failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }, every).unref();
}

let dumps = 0;
let kills = 0;

/**
 * The inspection hook, off unless KINFERENCE_DEBUG_STATE names a file: on SIGUSR2 the plugin server writes
 * there (atomically) its memory (process.memoryUsage, after a full GC when Node runs with --expose-gc, to
 * tell retained memory from heap V8 keeps) and what the plugin holds: pending decisions and their drop
 * counters, the routers' per-request entries, the segment caches, the decision workers (requests prepared,
 * restarts, their segment caches, their own heaps), and the event loop since the previous dump: its delay
 * (p50, p99, max), its utilization and its GC pauses by kind, to tell a stalled loop from a starved host. For operators, the leak
 * specs and bench:plugin. When KINFERENCE_DEBUG_KILL_WORKER names
 * a file and that file exists, a SIGUSR2 first deletes it and terminates one decision worker (in turn), as a
 * crash would: the fault specs.
 */
export function installStateDump(pending: PendingDecisions, env: NodeJS.ProcessEnv = process.env): void {
  const file = env.KINFERENCE_DEBUG_STATE;
  if (!file || process.listenerCount('SIGUSR2') > 0) return;
  const killFile = env.KINFERENCE_DEBUG_KILL_WORKER;
  // Only with the hook on: a 1 ms timer is cheap, but production has no reader for it.
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  let elu = performance.eventLoopUtilization();
  let gcs = newGcTally();
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) tallyGc(gcs, e);
  }).observe({ entryTypes: ['gc'] });
  const dump = async (): Promise<void> => {
    const loop = { ...eventLoopSince(delay, elu), gc: gcs };
    const pool = runningDecisionPool();
    if (killFile && pool && existsSync(killFile)) {
      rmSync(killFile, { force: true });
      await pool.killWorker(kills++);
    }
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc) gc();
    const state = {
      seq: ++dumps,
      atMs: Date.now(),
      gc: gc !== undefined,
      memory: process.memoryUsage(),
      pending: pending.stats(),
      routers: routerStats(),
      decisionWorkers: pool ? await pool.stats() : null,
      logOnceKeys: logOnceKeys(),
      eventLoop: loop,
    };
    writeFileSync(`${file}.tmp`, JSON.stringify(state));
    renameSync(`${file}.tmp`, file);
    // The next window starts after this dump's own work.
    delay.reset();
    elu = performance.eventLoopUtilization();
    gcs = newGcTally();
  };
  process.on('SIGUSR2', () => {
    dump().catch((e: unknown) =>
      logOnce('debug-state', `KINFERENCE_DEBUG_STATE ${file}: ${e instanceof Error ? e.message : String(e)}`),
    );
  });
}

/** The event loop's delay (ms) and utilization (0..1, busy share of wall time) since `since`. */
function eventLoopSince(
  delay: ReturnType<typeof monitorEventLoopDelay>,
  since: EventLoopUtilization,
): { delayMs: { p50: number; p99: number; max: number }; utilization: number; windowMs: number } {
  const ms = (ns: number): number => Math.round(ns / 1e4) / 100;
  const u = performance.eventLoopUtilization(since);
  return {
    // A histogram with no sample yet reads max 0 and percentiles NaN; report 0 delay then.
    delayMs: {
      p50: ms(delay.count ? delay.percentile(50) : 0),
      p99: ms(delay.count ? delay.percentile(99) : 0),
      max: ms(delay.count ? delay.max : 0),
    },
    utilization: Math.round(u.utilization * 1000) / 1000,
    windowMs: Math.round((u.idle + u.active) * 10) / 10,
  };
}

type GcTally = Record<'minor' | 'major' | 'other', { count: number; totalMs: number; maxMs: number }>;

function newGcTally(): GcTally {
  const z = (): { count: number; totalMs: number; maxMs: number } => ({ count: 0, totalMs: 0, maxMs: 0 });
  return { minor: z(), major: z(), other: z() };
}

function tallyGc(t: GcTally, e: { duration: number; detail?: unknown }): void {
  const kind = (e.detail as { kind?: number } | undefined)?.kind;
  const k =
    kind === constants.NODE_PERFORMANCE_GC_MINOR
      ? 'minor'
      : kind === constants.NODE_PERFORMANCE_GC_MAJOR
        ? 'major'
        : 'other';
  const ms = Math.round(e.duration * 100) / 100;
  t[k].count++;
  t[k].totalMs = Math.round((t[k].totalMs + ms) * 100) / 100;
  t[k].maxMs = Math.max(t[k].maxMs, ms);
}
