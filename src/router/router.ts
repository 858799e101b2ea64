// createRouter and route(): the routing pipeline as its list of steps, plus the log-phase feedback.
import { boundedDetail } from '../core/bounded-detail.js';
import type { PluginConfig } from '../config/plugin-config.js';
import type { TokenLimiter } from '../limits/index.js';
import { resolveTenant, type CallerFacts, type Tenant } from '../policies/index.js';
import type { IndexReader, KvIndex, ReservationStore } from '../index/index.js';
import type { ChatTemplate, PromptTokenizer } from '../tokenize/types.js';
import { createRouterMemory } from './memory.js';
import type { ClassAdmission, DecidedRoute, RouteOutcome } from './outcome.js';
import { Stopwatch } from './stopwatch.js';
import { admitClass } from './steps/admit-class.js';
import { bookTarget, type BookedRequest } from './steps/book.js';
import { choosePod } from './steps/choose.js';
import { checkContextWindow } from './steps/context-window.js';
import { fallback, type FallbackRoute } from './steps/fallback.js';
import { startLimits, type RouteLimit } from './steps/limit.js';
import { lookupPods, routableCandidates } from './steps/lookup.js';
import type { PrepareInPool } from './decision-pool.js';
import { predictPods } from './steps/predict.js';
import { shedOverload } from './steps/shed.js';
import { StepFallback } from './steps/step-fallback.js';
import { prepareRequest, type Learned } from './steps/prepare.js';

export { emptyOutcome, type DecidedRoute, type RouteOutcome, type RouteTarget } from './outcome.js';
export type { RouteTimings } from './stopwatch.js';
export { FIRST_LOOKUP_BUDGET_MS } from './steps/lookup.js';

/** What a router needs from the outside world; built once per config (resources.ts) or injected by tests. */
export interface RouterResources {
  index: IndexReader & ReservationStore & Pick<KvIndex, 'close'>;
  template: () => ChatTemplate;
  promptTokenizer: () => PromptTokenizer;
  /** Token limits, caps and budgets (src/limits); absent when the policies configure none. */
  limiter?: TokenLimiter | null;
  /**
   * Prepares the body in a decision worker (parse, template, tokenize, keys; decision-pool.ts); null while no
   * worker can (the router prepares it on its own thread). Absent: always on the router's thread.
   */
  prepare?: PrepareInPool | null;
}

export interface RouterOptions {
  clock?: () => number;
}

/** What became of the request at the pod the router chose, as the log phase saw it (null: not known). */
export interface UpstreamReport {
  /** The connection failed or the pod answered a gateway error (502, 503, 504). */
  failed: boolean;
  /** Bounded, prompt-free, e.g. "connection failed (502)"; shown in the reasons of later decisions. */
  detail: string;
}

/** How the caller takes a class-admission wait (policies only). */
export interface RouteAttempt {
  /** The caller can wait for capacity (the plugin's access phase): a blocked request may get `wait`. */
  canWait?: boolean;
  /** A re-decision after waiting: when the wait ends (the first outcome's admission.waitUntilMs). */
  waitUntilMs?: number;
  /** How long the request has waited so far, ms (said in a 429). */
  waitedMs?: number;
}

/** No caller facts (a caller that is not the plugin): the tenant comes from the body's user, or the default. */
const NO_CALLER: CallerFacts = { consumer: null, consumerGroups: [], headerTenant: null };

export interface Router {
  /**
   * Routes one request. `caller`: who sent it (plugins/kinference/caller.ts), read only with `policies`.
   * An outcome whose admission is `wait` has no target: wait with `waitTurn`, then route again.
   */
  route(
    body: Uint8Array | string,
    caller?: CallerFacts | null,
    attempt?: RouteAttempt,
  ): Promise<RouteOutcome>;
  /**
   * Waits, without blocking, until it is this waiting request's turn to re-decide (capacity freed, in
   * fairness order) or its wait is over. False: too many are waiting already (re-decide now, not waiting).
   */
  waitTurn(outcome: RouteOutcome): Promise<boolean>;
  /**
   * The log phase's feedback: releases the outcome's reservation, with a measured TTFT (streamed
   * responses only; null otherwise) teaches the pod's latency correction, and with an upstream report
   * keeps a failing pod out of the candidates for a while (passive health, upstream-failures.ts).
   */
  observe(outcome: RouteOutcome, actualTtftMs: number | null, upstream?: UpstreamReport | null): void;
  /** Drops what has expired (reservations, shared reservations, ITL flights), also of pods no longer looked up. */
  sweep(nowMs?: number): void;
  /** What the router holds now, per structure (diagnostics, and the specs that check nothing leaks). */
  stats(): RouterStats;
  close(): Promise<void>;
}

/** Entries a router holds: per request until its log phase (or TTL), and its bounded memories. */
export interface RouterStats {
  reservations: number;
  sharedReservations: number;
  flights: number;
  sentKeys: number;
}

/**
 * A router: `route` runs the request through the steps in src/router/steps (parse → render → tokenize → keys →
 * lookup → predict → choose → shed → book), timed by one stopwatch into the outcome's RouteTimings; a step
 * that cannot go on returns a StepFallback and the request is routed on load alone (steps/fallback.ts). `observe` takes the log phase's
 * feedback into the router's memory (memory.ts).
 */
export function createRouter(
  config: PluginConfig,
  resources: RouterResources,
  options: RouterOptions = {},
): Router {
  const clock = options.clock ?? Date.now;
  const memory = createRouterMemory(config, resources.index);
  const { reservations, shared, itl, failures, correction } = memory;
  /** Decisions made so far, and the one behind each outcome: tells failures of old requests from new ones. */
  let decisions = 0;
  const decisionOf = new WeakMap<RouteOutcome, number>();

  /**
   * Books the decided route on its pod unless shed (steps/book.ts), and numbers the outcome (passive health
   * tells the failures of old requests from new ones by it).
   */
  function book(
    route: DecidedRoute,
    shed: RouteOutcome['shed'],
    nowMs: number,
    uncachedTokens: number,
    request: BookedRequest | null = null,
    tenant: Tenant | null = null,
    admission: ClassAdmission | null = null,
    limit: RouteLimit | null = null,
  ): RouteOutcome {
    const waiting = admission?.action === 'wait';
    // Shed, or waiting to re-decide (which admits again): the limits' counts are given back.
    if (limit && (shed || waiting)) void limit.release();
    const booked = waiting
      ? { target: null, reservationId: null, flightId: null, kvReuseReport: false }
      : bookTarget(memory, { route, shed, uncachedTokens, request, nowMs, tenant });
    if (tenant && booked.target && memory.classes)
      memory.classes.counters.charge(
        tenant.name,
        uncachedTokens + (request?.maxTokens ?? config.policies?.default_output_tokens ?? 0),
      );
    const outcome: RouteOutcome = {
      ...route,
      target: booked.target,
      shed,
      tenant,
      admission,
      reservationId: booked.reservationId,
      flightId: booked.flightId,
      kvReuseReport: booked.kvReuseReport,
      ...(limit && !waiting ? { limit } : {}),
    };
    decisionOf.set(outcome, ++decisions);
    return outcome;
  }

  /** Over a limit, cap or budget: nothing is booked, Kong answers 429 (the plugin's limits phase). */
  function refused(route: DecidedRoute, tenant: Tenant | null, limit: RouteLimit): RouteOutcome {
    const outcome: RouteOutcome = {
      ...route,
      target: null,
      shed: null,
      tenant,
      admission: null,
      reservationId: null,
      flightId: null,
      kvReuseReport: false,
      limit,
    };
    decisionOf.set(outcome, ++decisions);
    return outcome;
  }

  async function route(
    body: Uint8Array | string,
    caller: CallerFacts | null = null,
    attempt: RouteAttempt = {},
  ): Promise<RouteOutcome> {
    const watch = new Stopwatch();
    const nowMs = clock();
    let tenant: Tenant | null = null;
    /** Admission by the limits, started once prompt tokens are known, awaited before booking. */
    let limiting: Promise<RouteLimit | null> = Promise.resolve(null);
    const learned: Learned = {
      model: null,
      lora: null,
      promptTokens: 0,
      truncated: false,
      promptChars: { cached: 0, tokenized: 0 },
    };
    /** A step could not go on: the request is routed on load alone, or left to Kong's target. */
    const leave = async (why: StepFallback): Promise<RouteOutcome> => {
      const limit = await limiting;
      // Booked in the turn the fallback chose its pod (steps/fallback.ts).
      const commit = (fell: FallbackRoute): RouteOutcome => {
        if (limit && !limit.verdict.admitted) {
          watch.stop();
          return refused(fell.route, tenant, limit);
        }
        // Never shed: a fallback has no cache knowledge to judge the SLOs by.
        const outcome = book(fell.route, null, nowMs, fell.uncachedTokens, null, tenant, null, limit);
        // What a cost quote reserves for the answer, known once the body parsed.
        outcome.maxTokens = maxTokens;
        watch.stop();
        return outcome;
      };
      const ctx = {
        ...learned,
        reason: why.reason,
        detail: why.detail,
        promptTokens: why.promptTokens ?? learned.promptTokens,
        watch,
        nowMs,
      };
      return await fallback(memory, ctx, commit);
    };
    let maxTokens: number | null = null;
    try {
      const ready = await prepareRequest(body, {
        ...resources,
        config,
        watch,
        learned,
        windows: memory.windows,
      });
      maxTokens = ready.maxTokens;
      if (config.policies && ready.user !== undefined)
        tenant = resolveTenant(config.policies, caller ?? NO_CALLER, ready.user);
      const prepared = ready.prepared;
      if (prepared instanceof StepFallback) return await leave(prepared);
      const { model, lora, keys, promptTokens, truncated } = prepared;

      // The limits run beside the lookup (their own Redis script, in flight at the same time).
      if (resources.limiter && tenant)
        limiting = startLimits(resources.limiter, tenant, model, promptTokens, maxTokens);

      const found = await watch.timeAsync('lookupMs', () => lookupPods(memory, model, keys, nowMs));
      if (found instanceof StepFallback) return await leave(found);
      const tooLong = checkContextWindow(memory, model, found.pods, promptTokens);
      if (tooLong) return await leave(tooLong);
      // From the prediction to the booking nothing yields to the event loop: a concurrent request deciding
      // in between would not see this one on its pod (two streams on a pod the ITL guard allows one). The
      // limits were in flight beside the lookup, so waiting for them here costs nothing more.
      const limit = await limiting;

      const candidates = routableCandidates(memory, model, found.pods);
      if (candidates instanceof StepFallback) return await leave(candidates);

      const { predictions, skipped } = watch.time('predictMs', () =>
        predictPods(memory, {
          pods: candidates,
          keys,
          promptTokens,
          maxTokens,
          others: found.others,
          nowMs,
        }),
      );

      let choice = watch.time('predictMs', () => choosePod(config, predictions, skipped, truncated));

      // Admission: a new step that may refuse the request (a policy, a limit) goes here, beside shedding.
      let admission: ClassAdmission | null = null;
      let shed: RouteOutcome['shed'] = null;
      if (tenant) {
        const wait = tenant.serviceClass.max_wait_ms;
        const until = attempt.waitUntilMs ?? (attempt.canWait && wait > 0 ? nowMs + wait : null);
        const waitedMs = attempt.waitedMs ?? 0;
        ({ choice, admission, shed } = admitClass(memory, {
          choice,
          tenant,
          nowMs,
          waitUntilMs: until,
          waitedMs,
          others: found.others,
        }));
      }
      shed ??= shedOverload(memory, choice.decision.chosen, choice.fallbackReason);

      const decided: DecidedRoute = {
        decision: choice.decision,
        fallbackReason: choice.fallbackReason,
        fallbackDetail: choice.fallbackDetail,
        model,
        lora,
        promptTokens,
        maxTokens,
        truncated,
        blocks: keys.length,
        promptChars: learned.promptChars,
        timings: watch.timings,
      };
      if (limit && !limit.verdict.admitted) {
        watch.stop();
        return refused(decided, tenant, limit);
      }
      const outcome = book(
        decided,
        shed,
        nowMs,
        choice.decision.chosen?.uncachedTokens ?? promptTokens,
        { keys, maxTokens, hasVllmXargs: prepared.hasVllmXargs },
        tenant,
        admission,
        limit,
      );
      // A waiter that got its pod: the next one in fairness order re-decides now.
      if (attempt.waitUntilMs !== undefined && admission?.action !== 'wait') memory.classes?.queue.wake();
      watch.stop();
      return outcome;
    } catch (e) {
      // Nothing may escape: a bug here must not turn a servable request into an error.
      return await leave(new StepFallback('internal_error', boundedDetail(e)));
    }
  }

  function observe(
    outcome: RouteOutcome,
    actualTtftMs: number | null,
    upstream: UpstreamReport | null = null,
  ): void {
    if (outcome.reservationId !== null) {
      reservations.release(outcome.reservationId);
      shared?.end(outcome.reservationId);
    }
    if (outcome.flightId !== null) itl?.end(outcome.flightId);
    // Capacity freed: the first waiting request (fairness order) re-decides.
    memory.classes?.queue.wake();
    // A class measured past its objective is squeezed: every pod protects it for a while (class-activity.ts).
    const cls = outcome.tenant?.serviceClass;
    if (cls && actualTtftMs !== null)
      memory.classes?.activity.judge(
        { priority: cls.priority, objectiveMs: cls.ttft_objective_ms },
        actualTtftMs,
        clock(),
        true,
      );
    if (outcome.target && upstream) {
      // An outcome from elsewhere (no record) counts as routed now.
      const seq = decisionOf.get(outcome) ?? decisions + 1;
      if (upstream.failed) failures.failed(outcome.target.podId, clock(), seq, decisions, upstream.detail);
      else failures.succeeded(outcome.target.podId, seq);
    }
    const chosen = outcome.decision.chosen;
    // Only full predictions teach the model; fallbacks had no cache information.
    // Kong sees the time to the upstream's first byte; vLLM sends headers before the first token, so that
    // is a TTFT only for upstreams that do not (latency_feedback opts in).
    if (
      config.latency_feedback &&
      outcome.target &&
      chosen &&
      actualTtftMs !== null &&
      outcome.fallbackReason === null
    )
      correction.observe(chosen.podId, chosen.modelTtftMs, actualTtftMs);
  }

  async function waitTurn(outcome: RouteOutcome): Promise<boolean> {
    const a = outcome.admission;
    const queue = memory.classes?.queue;
    if (!queue || !outcome.tenant || a?.action !== 'wait' || a.waitUntilMs === null) return false;
    const turn = queue.wait(outcome.tenant.name, a.priority, a.waitUntilMs - clock());
    if (turn === null) return false;
    await turn;
    return true;
  }

  return {
    route,
    waitTurn,
    observe,
    sweep(nowMs = clock()) {
      memory.classes?.activity.sweep(nowMs);
      reservations.sweep(nowMs);
      shared?.sweep(nowMs);
      itl?.sweep(nowMs);
    },
    stats: () => ({
      reservations: reservations.size,
      sharedReservations: shared?.size ?? 0,
      flights: itl?.flights ?? 0,
      sentKeys: memory.sends.size,
    }),
    close: async () => {
      memory.classes?.queue.drain();
      await Promise.all([resources.index.close(), resources.limiter?.close()]);
    },
  };
}
