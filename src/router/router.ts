import { performance } from 'node:perf_hooks';
import { blockKeys, keySeed } from '../core/block-keys.js';
import { choose, type Decision } from '../core/choose.js';
import type { FallbackReason } from '../core/fallback.js';
import { predictTtft, type Prediction } from '../core/predictor.js';
import { parseChatBody } from '../core/request.js';
import {
  dataParallelRankOf,
  type BlockKey,
  type LookupResult,
  type PodLookup,
  type PodState,
  type Reservation,
} from '../core/types.js';
import { isKinferenceError } from '../core/errors.js';
import type { PluginConfig } from '../config/plugin-config.js';
import { defaultPodState, type KvIndex } from '../index/kv-index.js';
import type { ChatTemplate, PromptTokenizer } from '../tokenize/types.js';
import { TtftCorrection } from './correction.js';
import { ItlAdmission } from './itl-admission.js';
import { ReservationBook } from './reservations.js';
import { SEND_MEMORY_STRIDE, SendMemory } from './send-memory.js';
import { SharedReservations } from './shared-reservations.js';
import { UpstreamFailures } from './upstream-failures.js';

export interface RouteTimings {
  parseMs: number;
  templateMs: number;
  tokenizeMs: number;
  keysMs: number;
  lookupMs: number;
  predictMs: number;
  totalMs: number;
}

export interface RouteTarget {
  host: string;
  port: number;
  podId: string;
  /**
   * The pod is one DP rank of a vLLM server (`<pod>@dp<r>`): the request must carry X-data-parallel-rank,
   * or vLLM's own balancer picks a rank by load alone, whatever its cache holds.
   */
  dataParallelRank?: number;
}

export interface RouteOutcome {
  /** null → leave Kong's default target (the service url). */
  target: RouteTarget | null;
  decision: Decision;
  fallbackReason: FallbackReason | null;
  /**
   * Human-readable detail of the fallback (never contains prompt text): the parse, template or tokenizer
   * load error, the index error, or which pods were out when none was healthy.
   */
  fallbackDetail: string | null;
  /** Base model the pods serve, and the LoRA adapter when the request named one. */
  model: string | null;
  lora: string | null;
  promptTokens: number;
  truncated: boolean;
  /** Blocks of the prompt (full blocks with a key). */
  blocks: number;
  /** The rendered prompt's characters served by the tokenizer's segment cache, and those tokenized now. */
  promptChars: { cached: number; tokenized: number };
  timings: RouteTimings;
  shed: { retryAfterS: number; status: 429 } | null;
  /** The reservation made on the chosen pod; `observe` releases it. */
  reservationId: number | null;
  /** The ITL guard's record of the request in flight (null when the guard is off); `observe` ends it. */
  flightId: number | null;
  /**
   * Ask the chosen pod to report the cached blocks this request reuses (`kv_reuse_reports_ms`): its index
   * was rebuilt without its whole event history a short while ago, and the body has no vllm_xargs of its own.
   */
  kvReuseReport: boolean;
}

/** What a router needs from the outside world; built once per config (resources.ts) or injected by tests. */
export interface RouterResources {
  index: KvIndex;
  template: () => ChatTemplate;
  promptTokenizer: () => PromptTokenizer;
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

export interface Router {
  route(body: Uint8Array | string): Promise<RouteOutcome>;
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
 * The first lookup of a router also opens the Redis connection and loads the script: it gets this much
 * time at least, so the first request after a deploy is routed on the index rather than failing open.
 */
export const FIRST_LOOKUP_BUDGET_MS = 1000;

class LookupTimeout extends Error {}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LookupTimeout(`index lookup over ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

function splitAddress(address: string): { host: string; port: number } | null {
  const i = address.lastIndexOf(':');
  if (i <= 0) return null;
  const port = Number(address.slice(i + 1));
  if (!Number.isInteger(port) || port <= 0 || port > 65535) return null;
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  return host ? { host, port } : null;
}

/**
 * A pod Kong can be sent to. One without (no address yet, port 0) is no candidate: routed there, the request
 * would go to the service url with no reason given.
 */
function routable(state: PodState): boolean {
  return splitAddress(state.address) !== null;
}

const NO_PREFIX = { GPU: 0, CPU: 0, STORAGE: 0 } as const;

/**
 * `rec[key]` for config maps keyed by request-supplied names: a model named "constructor" or "__proto__"
 * must not find Object.prototype's members (a function as the base model, `.map` of a function).
 */
function own<T>(rec: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  return rec !== undefined && Object.hasOwn(rec, key) ? rec[key] : undefined;
}

/** A bounded, prompt-free description of what went wrong. */
/** The error's message, prefixed with its KINF_ERR_* code when it has one, so a log line can be looked up. */
function detailOf(e: unknown): string {
  const message = String((e as Error)?.message ?? e);
  const code = isKinferenceError(e) ? e.code : null;
  return (code && !message.startsWith(code) ? `${code}: ${message}` : message).slice(0, 300);
}

export function createRouter(
  config: PluginConfig,
  resources: RouterResources,
  options: RouterOptions = {},
): Router {
  const clock = options.clock ?? Date.now;
  const reservations = new ReservationBook(config.reservation_ttl_ms);
  const sends = new SendMemory();
  const shared =
    config.share_reservations && config.reservation_ttl_ms > 0
      ? new SharedReservations(resources.index, config.reservation_ttl_ms)
      : null;
  const correction = new TtftCorrection();
  const itl = config.itl_slo_ms > 0 ? new ItlAdmission(config) : null;
  /** Last pods seen per model, so an index outage can still spread load (fail open, not fail blind). */
  const lastKnownPods = new Map<string, PodState[]>();
  let lookedUp = false;
  const failures = new UpstreamFailures();
  /** Decisions made so far, and the one behind each outcome: tells failures of old requests from new ones. */
  let decisions = 0;
  const decisionOf = new WeakMap<RouteOutcome, number>();

  /** One index lookup under the router's deadline (the first one, which also connects, gets longer). */
  async function lookupIndex(model: string, keys: readonly BlockKey[]): Promise<LookupResult> {
    const budget = lookedUp
      ? config.redis_timeout_ms
      : Math.max(config.redis_timeout_ms, FIRST_LOOKUP_BUDGET_MS);
    try {
      return await withTimeout(resources.index.lookup(model, keys), budget);
    } finally {
      lookedUp = true;
    }
  }

  /**
   * Marks the pods kept out after a recent upstream failure: unhealthy for this decision, with the reason
   * in their prediction. Returns their ids (choose ranks them last when no pod is left).
   */
  function markSkipped(predictions: Prediction[], nowMs: number): Set<string> {
    const out = new Set<string>();
    for (const p of predictions) {
      const s = failures.skip(p.podId, nowMs);
      if (!s) continue;
      out.add(p.podId);
      p.healthy = false;
      p.reasons.push(
        `skipped: upstream ${s.detail}, ${s.strikes} failed ${s.strikes === 1 ? 'try' : 'tries'} in a row; ` +
          `out for ${Math.ceil((s.untilMs - nowMs) / 100) / 10} s more`,
      );
    }
    return out;
  }

  /** Why no pod could be chosen as healthy: each pod and what is wrong with it (bounded). */
  function unhealthyDetail(predictions: readonly Prediction[], skipped: ReadonlySet<string>): string {
    const each = predictions.map((p) =>
      skipped.has(p.podId) ? `${p.podId} upstream failures` : `${p.podId} unhealthy (collector)`,
    );
    return `no healthy pod: ${each.join(', ')}`.slice(0, 300);
  }

  function staticPods(model: string): PodState[] {
    return (own(config.model_pods, model) ?? []).map((address) => ({
      ...defaultPodState({ model, podId: address }),
      address,
    }));
  }

  function predictAll(
    pods: readonly PodLookup[],
    promptTokens: number,
    nowMs: number,
    maxTokens: number | null,
    others: ReadonlyMap<string, Reservation[]> | null = null,
  ): Prediction[] {
    return pods.map((pod) => {
      const own = reservations.active(pod.state.podId, nowMs);
      const theirs = others?.get(pod.state.podId);
      const active = theirs ? [...own, ...theirs] : own;
      const prediction = predictTtft(pod, {
        promptTokens,
        blockSize: config.block_size,
        nowMs,
        staleAfterMs: config.stale_after_ms,
        reservations: active,
        ttftFactor: correction.factor(pod.state.podId),
      });
      itl?.assess({ pod, prediction, reservations: active, promptTokens, maxTokens, nowMs });
      return prediction;
    });
  }

  /**
   * Cached credit the index cannot show yet or any more, with the reason, or null: a prompt this router sent
   * to a pod that has not answered yet will be cached there before the pod reaches a request queued behind
   * it, but its KV events arrive only after its prefill; and after a partial rebuild (partialSinceMs, within
   * kv_reuse_reports_ms) the index lost what the pod cached before, which this router's own sends recall.
   */
  function creditedPrefix(
    pod: PodLookup,
    keys: readonly BlockKey[],
    nowMs: number,
  ): { pod: PodLookup; reason: string } | null {
    const b = pod.prefixBlocks;
    const pending = reservations.pendingPrefixBlocks(pod.state.podId, keys, nowMs);
    const remembered = reportsReuse(pod.state.partialSinceMs, nowMs)
      ? sends.prefixBlocks(pod.state.podId, keys)
      : 0;
    const blocks = Math.max(pending, remembered);
    if (blocks <= b.GPU) return null;
    return {
      pod: {
        state: pod.state,
        prefixBlocks: { GPU: blocks, CPU: Math.max(b.CPU, blocks), STORAGE: Math.max(b.STORAGE, blocks) },
      },
      reason:
        pending >= remembered
          ? 'cached credit includes a prompt sent here whose KV events are pending'
          : "cached credit includes a prompt this router sent here, which the pod's rebuilt index lost",
    };
  }

  /** Within kv_reuse_reports_ms of a pod's partial rebuild: its requests ask for reuse reports. */
  function reportsReuse(partialSinceMs: number, nowMs: number): boolean {
    const w = config.kv_reuse_reports_ms;
    return w > 0 && partialSinceMs > 0 && nowMs - partialSinceMs < w;
  }

  function finish(
    base: Omit<RouteOutcome, 'target' | 'shed' | 'reservationId' | 'flightId' | 'kvReuseReport'>,
    nowMs: number,
    uncachedTokens: number,
    request: { keys: readonly BlockKey[]; maxTokens: number | null; hasVllmXargs: boolean } | null = null,
  ): RouteOutcome {
    const keys = request?.keys ?? [];
    const maxTokens = request?.maxTokens ?? null;
    // kong-default: with no healthy pod, the service url is a better bet than a pod known to be down.
    if (config.fallback === 'kong-default' && base.decision.fallbackReason === 'all_pods_unhealthy')
      base = { ...base, decision: { ...base.decision, chosen: null } };
    const chosen = base.decision.chosen;
    let shed: RouteOutcome['shed'] = null;
    if (config.shed_ttft_slo_ms > 0 && chosen !== null && base.fallbackReason === null) {
      // Retry once the best pod is expected to have drained the excess, or (ITL guard) once enough of the
      // prefill sent to it has left the window. Only a queue is worth waiting out: a request over the bound
      // on an empty pod is served (shedding it would protect nobody, and a cold prompt would never run again
      // to refresh an overestimated calibration).
      const unqueuedMs = (chosen.modelTtftMs - chosen.queueMs - chosen.interferenceMs) * chosen.ttftFactor;
      const overTtftMs =
        unqueuedMs > config.shed_ttft_slo_ms
          ? 0
          : Math.max(0, chosen.predictedTtftMs - config.shed_ttft_slo_ms);
      const overItlMs = chosen.withinItl ? 0 : (itl?.retryAfterMs(chosen) ?? 0);
      if (overTtftMs > 0 || !chosen.withinItl)
        shed = { retryAfterS: Math.max(1, Math.ceil(Math.max(overTtftMs, overItlMs) / 1000)), status: 429 };
    }
    const addr = chosen && !shed ? splitAddress(chosen.address) : null;
    const reservationId =
      addr && chosen
        ? reservations.add(
            {
              podId: chosen.podId,
              atMs: nowMs,
              uncachedTokens,
              promptTokens: base.promptTokens,
            },
            keys,
          )
        : null;
    if (reservationId !== null && shared && base.model !== null)
      shared.share(base.model, reservationId, {
        podId: chosen!.podId,
        atMs: nowMs,
        uncachedTokens,
        promptTokens: base.promptTokens,
      });
    const flightId = addr && chosen && itl ? itl.record(chosen, nowMs, base.promptTokens, maxTokens) : null;
    const rank = chosen ? dataParallelRankOf(chosen.podId) : null;
    const target: RouteTarget | null =
      addr && chosen
        ? { ...addr, podId: chosen.podId, ...(rank !== null ? { dataParallelRank: rank } : {}) }
        : null;
    if (target && keys.length > 0 && config.kv_reuse_reports_ms > 0) {
      // About what the pod's KV cache holds, when the collector has said.
      const cap = lastKnownPods
        .get(base.model ?? '')
        ?.find((p) => p.podId === target.podId)?.kvCapacityTokens;
      sends.record(
        target.podId,
        keys,
        cap ? Math.ceil(cap / (config.block_size * SEND_MEMORY_STRIDE)) : undefined,
      );
    }
    const kvReuseReport =
      target !== null &&
      request !== null &&
      !request.hasVllmXargs &&
      reportsReuse(chosen!.partialSinceMs, nowMs);
    if (kvReuseReport)
      chosen!.reasons.push(
        `index rebuilt without the pod's whole event history ${Math.round((nowMs - chosen!.partialSinceMs) / 1000)} s ago: asking it to report the cached blocks this request reuses`,
      );
    const outcome = { ...base, target, shed, reservationId, flightId, kvReuseReport };
    decisionOf.set(outcome, ++decisions);
    return outcome;
  }

  /** Pods to rank on load alone: the index's (one lookup without block keys) or the last seen, else model_pods. */
  async function loadOnlyPods(
    reason: FallbackReason,
    model: string,
    timings: RouteTimings,
  ): Promise<{ pods: PodState[]; indexError: string | null }> {
    // The index just failed or had no pods: do not ask it again on this request.
    // An index that answered with no pods is current: its pods left, so only model_pods stand in.
    if (reason === 'no_pods_in_index') {
      lastKnownPods.delete(model);
      return { pods: staticPods(model), indexError: null };
    }
    if (reason === 'index_error' || reason === 'index_timeout') {
      const known = lastKnownPods.get(model);
      return { pods: known && known.length > 0 ? known : staticPods(model), indexError: null };
    }
    const t = performance.now();
    try {
      const pods = (await lookupIndex(model, [])).pods.map((p) => p.state);
      if (pods.length > 0) lastKnownPods.set(model, pods);
      return { pods: pods.length > 0 ? pods : staticPods(model), indexError: null };
    } catch (e) {
      const known = lastKnownPods.get(model);
      return { pods: known && known.length > 0 ? known : staticPods(model), indexError: detailOf(e) };
    } finally {
      timings.lookupMs += performance.now() - t;
    }
  }

  /**
   * Routing without cache knowledge: rank the model's pods on load alone (healthy ones, and not those kept out
   * after an upstream failure), or leave Kong's target.
   */
  async function fallback(
    reason: FallbackReason,
    detail: string,
    model: string | null,
    lora: string | null,
    promptTokens: number,
    truncated: boolean,
    promptChars: RouteOutcome['promptChars'],
    timings: RouteTimings,
    nowMs: number,
  ): Promise<RouteOutcome> {
    const empty: Decision = { candidates: [], chosen: null, fallbackReason: reason };
    const base = {
      fallbackReason: reason,
      fallbackDetail: detail,
      model,
      lora,
      promptTokens,
      truncated,
      blocks: 0,
      promptChars,
      timings,
    };
    if (config.fallback === 'kong-default' || model === null)
      return finish({ ...base, decision: empty }, nowMs, 0);
    const loaded = await loadOnlyPods(reason, model, timings);
    const { indexError } = loaded;
    const pods = loaded.pods.filter(routable);
    if (indexError !== null) base.fallbackDetail = `${detail}; index: ${indexError}`.slice(0, 600);
    if (pods.length === 0) return finish({ ...base, decision: empty }, nowMs, 0);
    const t = performance.now();
    const predictions = predictAll(
      pods.map((state) => ({ state, prefixBlocks: { ...NO_PREFIX } })),
      promptTokens,
      nowMs,
      null,
    );
    const decision = choose(predictions, markSkipped(predictions, nowMs));
    timings.predictMs = performance.now() - t;
    return finish({ ...base, decision: { ...decision, fallbackReason: reason } }, nowMs, promptTokens);
  }

  async function route(body: Uint8Array | string): Promise<RouteOutcome> {
    const t0 = performance.now();
    const timings: RouteTimings = {
      parseMs: 0,
      templateMs: 0,
      tokenizeMs: 0,
      keysMs: 0,
      lookupMs: 0,
      predictMs: 0,
      totalMs: 0,
    };
    const done = (o: RouteOutcome): RouteOutcome => {
      timings.totalMs = performance.now() - t0;
      return o;
    };
    const nowMs = clock();
    let model: string | null = null;
    let lora: string | null = null;
    let promptTokens = 0;
    let truncated = false;
    const promptChars = { cached: 0, tokenized: 0 };
    const bail = async (
      reason: FallbackReason,
      detail: string,
      tokens = promptTokens,
    ): Promise<RouteOutcome> =>
      done(await fallback(reason, detail, model, lora, tokens, truncated, promptChars, timings, nowMs));
    try {
      const parsed = parseChatBody(body, config.max_body_bytes);
      let t = performance.now();
      timings.parseMs = t - t0;
      if (!parsed.ok) {
        const m = parsed.model ?? null;
        model = m === null ? null : (own(config.lora_adapters, m) ?? m);
        lora = model !== m ? m : null;
        return await bail(parsed.reason, parsed.detail);
      }
      const req = parsed.request;
      const baseModel = own(config.lora_adapters, req.model);
      model = baseModel ?? req.model;
      lora = baseModel ? req.model : null;

      let text: string;
      try {
        text = resources.template().render(req);
      } catch (e) {
        return await bail('template_error', detailOf(e));
      }
      let u = performance.now();
      timings.templateMs = u - t;
      t = u;

      let tokens: number[];
      try {
        const r = await resources.promptTokenizer().tokenize(text, config.max_prompt_tokens);
        tokens = r.tokens;
        truncated = r.truncated;
        promptChars.cached = r.cachedChars;
        promptChars.tokenized = r.tokenizedChars;
      } catch (e) {
        return await bail('tokenizer_error', detailOf(e), Math.ceil(text.length / 4));
      }
      promptTokens = tokens.length;
      u = performance.now();
      timings.tokenizeMs = u - t;
      t = u;

      const keys: BlockKey[] = blockKeys(
        tokens,
        config.block_size,
        keySeed({ model, lora, cacheSalt: req.cacheSalt ?? null }),
      );
      u = performance.now();
      timings.keysMs = u - t;
      t = u;

      // The other nodes' reservations are read beside the lookup (sent after it, so its reply comes first);
      // without them, ours alone.
      const lookupSent = lookupIndex(model, keys);
      const othersRead = shared
        ? withTimeout(shared.others(model, nowMs), config.redis_timeout_ms).catch(() => null)
        : null;
      let lookup: LookupResult;
      try {
        lookup = await lookupSent;
      } catch (e) {
        timings.lookupMs = performance.now() - t;
        const timeout = e instanceof LookupTimeout || isKinferenceError(e, 'KINF_ERR_REDIS_TIMEOUT');
        return await bail(timeout ? 'index_timeout' : 'index_error', detailOf(e));
      }
      const others = await othersRead;
      u = performance.now();
      timings.lookupMs = u - t;
      t = u;

      if (lookup.pods.length === 0)
        return await bail('no_pods_in_index', `no pods registered for model ${model}`);
      const candidates = lookup.pods.filter((p) => routable(p.state));
      lastKnownPods.set(
        model,
        candidates.map((p) => p.state),
      );
      if (candidates.length === 0)
        return await bail(
          'no_pods_in_index',
          `no pod of model ${model} has a host:port address: ${lookup.pods
            .map((p) => `${p.state.podId} "${p.state.address}"`)
            .join(', ')}`.slice(0, 300),
        );
      const credits = candidates.map((pod) => creditedPrefix(pod, keys, nowMs));
      const pods = candidates.map((pod, i) => credits[i]?.pod ?? pod);
      const maxTokens = req.maxTokens ?? null;
      const predictions = predictAll(pods, promptTokens, nowMs, maxTokens, others);
      credits.forEach((c, i) => c && predictions[i]!.reasons.push(c.reason));
      const skipped = markSkipped(predictions, nowMs);
      const decision = choose(predictions, skipped);
      timings.predictMs = performance.now() - t;
      const reason: FallbackReason | null =
        decision.fallbackReason ?? (truncated ? 'prompt_truncated' : null);
      const unhealthy = reason === 'all_pods_unhealthy' ? unhealthyDetail(predictions, skipped) : null;
      const uncached = decision.chosen?.uncachedTokens ?? promptTokens;
      return done(
        finish(
          {
            decision,
            fallbackReason: reason,
            fallbackDetail: unhealthy,
            model,
            lora,
            promptTokens,
            truncated,
            blocks: keys.length,
            promptChars,
            timings,
          },
          nowMs,
          uncached,
          { keys, maxTokens, hasVllmXargs: req.hasVllmXargs === true },
        ),
      );
    } catch (e) {
      // Nothing may escape: a bug here must not turn a servable request into an error.
      return await bail('internal_error', detailOf(e));
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

  return {
    route,
    observe,
    sweep(nowMs = clock()) {
      reservations.sweep(nowMs);
      shared?.sweep(nowMs);
      itl?.sweep(nowMs);
    },
    stats: () => ({
      reservations: reservations.size,
      sharedReservations: shared?.size ?? 0,
      flights: itl?.flights ?? 0,
      sentKeys: sends.size,
    }),
    close: () => resources.index.close(),
  };
}
