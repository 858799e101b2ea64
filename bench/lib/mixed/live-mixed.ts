// The mixed-tenant scenario through the live stack: key-auth consumers, a fresh stack per arm, real minutes.
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { Redis } from 'ioredis';
import { randomArm } from '../arms/simple.js';
import { clientRandomRouter } from '../arms/kube-proxy.js';
import type { MixedRecord, MixedResult } from '../des/run-mixed.js';
import { driveLoad } from '../live/drive-load.js';
import { streamChat, type StreamTiming } from '../live/http-client.js';
import { podsServed, startLiveStack, type LiveStack } from '../live/stack.js';
import { Rng } from '../rng.js';
import type { BenchSchedule } from '../schedule.js';
import type { ModelSetup } from '../setup.js';
import type { ArmDecision } from '../arms/types.js';
import {
  mixedPolicies,
  tenantSources,
  type MixedArmName,
  type MixedScenario,
  type RequestLimits,
  type TenantLoad,
} from './scenario.js';

/** One live request of the mix: its record, and the UTC minute a limiter (or, with none, the client) put it in. */
export interface LiveMixedRecord extends MixedRecord {
  /** Start (epoch ms) of the UTC minute window that admitted it; null when refused. */
  admittedWindowMs: number | null;
}

export interface LiveMixedResult extends MixedResult {
  records: LiveMixedRecord[];
  /** Epoch ms of the measure window's start (a whole UTC minute: the run is aligned to it). */
  measureStartEpochMs: number;
  /** Plugin log lines that say a limit was skipped (Redis slower than its budget: admitted uncounted). */
  uncountedAdmissions: number;
  /** The limiter's own prompt-token counters per UTC minute in Redis (kinference+policies), by window start (epoch ms). */
  limiterPromptCounters: Record<string, number>;
  loadAvg: { before: number[]; after: number[] };
}

/** Each consumer's key-auth key. */
export const keyOf = (tenant: string): string => `${tenant}-key`;

/** What the plugin's settings add on a shared, loaded host (the same for every gateway arm). */
export const LIVE_PLUGIN_SETTINGS = {
  // The default 25 ms lookup/limit budget on a 2-core host shared with other runs: a limit past it admits
  // uncounted (on_redis_error: allow). A budget the host keeps makes the limit what is measured.
  redis_timeout_ms: 250,
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Who answered a 429, from its body (the gateway's own answers). */
function refusedBy(t: StreamTiming): NonNullable<ArmDecision['rejected']>['by'] {
  const e = t.error ?? '';
  if (e.includes('class_overloaded')) return 'class';
  if (e.includes('_tokens_per_') || e.includes('rate_limit_error')) return 'limit';
  if (e.includes('API rate limit exceeded')) return 'request-limit';
  return 'shed';
}

/** The window start a limiter's reset header names: now + the seconds left, rounded to the minute. */
export function windowOf(headers: IncomingHttpHeaders, epochMs: number): number | null {
  const raw = headers['x-ai-ratelimit-reset-60-prompt'] ?? headers['ratelimit-reset'];
  const resetS = Number(Array.isArray(raw) ? raw[0] : raw);
  if (raw === undefined || !Number.isFinite(resetS)) return null;
  return Math.round((epochMs + resetS * 1000) / 60_000) * 60_000 - 60_000;
}

export interface LiveMixedOptions {
  arm: MixedArmName;
  scenario: MixedScenario;
  schedule: BenchSchedule;
  model: ModelSetup;
  cli: string;
  load: TenantLoad;
  requestLimits: RequestLimits;
  /** Kong nodes; each request goes to the next in turn. */
  gateways?: number;
  /** The children's stderr goes here (counted for uncounted admissions afterwards). */
  childLog: string;
  log(line: string): void;
}

/**
 * Runs one arm live: a fresh stack (Redis, emulated pods at time scale 1, collector, Kong stand-in with
 * key-auth, the consumers and, in the rate-limit arms, Kong's rate-limiting on each limited consumer, policy
 * redis), then every tenant at once from the arm's own client, started so the measure window opens on a
 * whole UTC minute (rate limits count per real minute). random: the client picks the pod (the DES random
 * arm's seeded stream) and sends through the gateway's route to it; kinference: the chat route.
 */
export async function runLiveMixedArm(o: LiveMixedOptions): Promise<LiveMixedResult> {
  const s = o.scenario;
  const kongLimit = o.arm.endsWith('kong-rate-limit');
  const policies = o.arm === 'kinference+policies';
  const random = o.arm.startsWith('random');
  const tenants = tenantSources(s, o.model, o.load);
  const stack: LiveStack = await startLiveStack({
    pods: o.schedule.pods,
    profile: o.schedule.emulatorProfile,
    kvCapacityTokens: o.schedule.kvCapacityTokens,
    timeScale: 1,
    seed: o.schedule.seed,
    scrapeIntervalMs: o.schedule.latency.scrapeIntervalMs,
    model: o.model,
    cli: o.cli,
    childLog: o.childLog,
    gateways: o.gateways ?? 1,
    podRoutes: random,
    routePlugins: [{ name: 'key-auth', config: { hide_credentials: true } }],
    consumers: (redis) =>
      tenants.map((t) => ({
        username: t.name,
        keyauth_credentials: [{ key: keyOf(t.name) }],
        plugins:
          kongLimit && o.requestLimits[t.name] !== undefined
            ? [
                {
                  name: 'rate-limiting',
                  config: { minute: o.requestLimits[t.name], limit_by: 'consumer', policy: 'redis', redis },
                },
              ]
            : [],
      })),
    pluginExtra: { ...LIVE_PLUGIN_SETTINGS, ...(policies ? { policies: mixedPolicies(s) } : {}) },
  });
  const onSignal = (): void => void stack.stop().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const logLinesBefore = uncountedLines(o.childLog);
    // The measure window opens on a whole UTC minute.
    const warmupMs = s.windows.warmupS * 1000;
    const wait = (60_000 - ((Date.now() + warmupMs) % 60_000)) % 60_000;
    o.log(
      `  ${o.arm}: stack up; starting in ${(wait / 1000).toFixed(0)} s (measure window on a whole minute)`,
    );
    await sleep(wait);
    const measureStartEpochMs = Math.round((Date.now() + warmupMs) / 60_000) * 60_000;
    const loadBefore = (await import('node:os')).loadavg();
    const pick = clientRandomRouter(
      randomArm(Rng.derive(s.seed, 0, 'arm', 'random')),
      stack.pods.map((p) => p.id),
    );
    let nextGateway = 0;
    const viaLog = new Map<string, { key: string; tenant: string }>();
    const epochOffset = Date.now() - performance.now();
    const runs = tenants.map(async (t) => {
      const recs = new Map<object, { window: number | null; status: number; t: StreamTiming }>();
      const r = await driveLoad({
        profile: { ...t.profile, ...s.windows },
        factory: t.factory,
        model: o.model.model,
        seed: s.seed,
        trial: 0,
        timeScale: 1,
        arrivalStream: `${t.name}:${t.factory.name}`,
        send: async ({ rec, body, virt }) => {
          const gw = stack.gateways[nextGateway++ % stack.gateways.length]!;
          let path: string | undefined;
          if (random) {
            const d = pick.choose(0, virt(performance.now()));
            path = stack.podPaths![d.podId]!;
            rec.pod = d.podId;
          }
          let window: number | null = null;
          const sentEpoch = Date.now();
          const timing = await streamChat(gw.host, gw.port, body, path, {
            headers: { apikey: keyOf(t.name) },
            onResponse: (status, headers, atMs) => {
              if (status !== 429)
                window = windowOf(headers, atMs + epochOffset) ?? Math.floor(sentEpoch / 60_000) * 60_000;
            },
          });
          if (!random && timing.requestId !== null && timing.status === 200)
            viaLog.set(timing.requestId, { key: rec.key, tenant: t.name });
          recs.set(rec, { window, status: timing.status, t: timing });
          return timing;
        },
      });
      return r.records.map((rec): LiveMixedRecord => {
        const x = recs.get(rec);
        const refused = x?.status === 429;
        return {
          ...rec,
          tenant: t.name,
          rejectedBy: refused ? refusedBy(x.t) : null,
          trace: null,
          waitedMs: 0,
          admittedWindowMs: refused || !x ? null : x.window,
        };
      });
    });
    const started = performance.now();
    const results = await Promise.all(runs);
    const records = results.flat();
    // The pod of each gateway-routed request, from the file-log (for the per-pod figures only).
    if (viaLog.size > 0) {
      const served = await podsServed(stack, [...viaLog.keys()]);
      const byKey = new Map(records.map((r) => [r.key + r.tenant, r]));
      for (const [id, rec] of viaLog) {
        const r = byKey.get(rec.key + rec.tenant);
        if (r) r.pod = served.get(id) ?? r.pod;
      }
    }
    const limiterPromptCounters = policies ? await promptCounters(stack) : {};
    const loadAfter = (await import('node:os')).loadavg();
    const durationMs = (s.windows.warmupS + s.windows.measureS + s.windows.cooldownS) * 1000;
    return {
      records,
      windowStartMs: warmupMs,
      windowEndMs: warmupMs + s.windows.measureS * 1000,
      durationMs,
      pods: [],
      wallMs: performance.now() - started,
      measureStartEpochMs,
      uncountedAdmissions: uncountedLines(o.childLog) - logLinesBefore,
      limiterPromptCounters,
      loadAvg: { before: loadBefore, after: loadAfter },
    };
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    await stack.stop();
  }
}

/** Lines of the children's log that say a request was admitted uncounted (the limits' fail-open). */
function uncountedLines(path: string): number {
  if (!existsSync(path)) return 0;
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.includes('admitted uncounted')).length;
}

/** The limiter's prompt-token-per-minute counters (src/limits/limit-keys.ts), by the window in the key. */
async function promptCounters(stack: LiveStack): Promise<Record<string, number>> {
  const r = new Redis(stack.redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await r.connect();
    const out: Record<string, number> = {};
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${stack.keyPrefix}:{l:*}:w:*:prompt:minute:*`);
      cursor = next;
      for (const k of keys)
        out[String(Number(k.slice(k.lastIndexOf(':') + 1)) * 1000)] = Number(await r.get(k));
    } while (cursor !== '0');
    return out;
  } finally {
    r.disconnect();
  }
}

/**
 * Prompt tokens admitted per whole UTC minute of the measure window, each request in the window its
 * limiter's reset header names (the client's send time when no limiter answered).
 */
export function acceptedPerUtcMinute(
  recs: readonly LiveMixedRecord[],
  measureStartEpochMs: number,
  measureS: number,
): number[] {
  const out: number[] = [];
  for (let m = 0; (m + 1) * 60 <= measureS; m++) {
    const start = measureStartEpochMs + m * 60_000;
    const mine = recs.filter(
      (x) => x.admittedWindowMs !== null && Math.floor(x.admittedWindowMs / 60_000) * 60_000 === start,
    );
    out.push(mine.reduce((a, x) => a + x.promptTokens, 0));
  }
  return out;
}
