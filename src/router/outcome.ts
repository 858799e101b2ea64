// What route() returns: target, decision, reservation, timings; emptyOutcome for a body never read.
import type { Decision } from '../core/choose.js';
import type { FallbackReason } from '../core/fallback.js';
import type { RouteLimit } from './steps/limit.js';
import type { Tenant } from '../policies/index.js';
import { zeroTimings, type RouteTimings } from './stopwatch.js';

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
  /** The request's max_tokens (max_completion_tokens), null when it names none or was not parsed. */
  maxTokens?: number | null;
  truncated: boolean;
  /** Blocks of the prompt (full blocks with a key). */
  blocks: number;
  /** The rendered prompt's characters served by the tokenizer's segment cache, and those tokenized now. */
  promptChars: { cached: number; tokenized: number };
  timings: RouteTimings;
  /** A 429 with Retry-After: shed_ttft_slo_ms, or (byClass) a sheddable class no pod could take. */
  shed: { retryAfterS: number; status: 429; byClass?: { waitedMs: number } } | null;
  /** The request's tenant and class (null without `policies`). */
  tenant: Tenant | null;
  /** What class admission did (null without `policies`); `wait`: no pod now, the caller may wait and re-decide. */
  admission: ClassAdmission | null;
  /** The reservation made on the chosen pod; `observe` releases it. */
  reservationId: number | null;
  /** The ITL guard's record of the request in flight (null when the guard is off); `observe` ends it. */
  flightId: number | null;
  /**
   * Ask the chosen pod to report the cached blocks this request reuses (`kv_reuse_reports_ms`): its index
   * was rebuilt without its whole event history a short while ago, and the body has no vllm_xargs of its own.
   */
  kvReuseReport: boolean;
  /**
   * Token limits, caps and budgets (policies; null when none apply): a refused request has no target and
   * is answered 429; an admitted one settles at its log phase (src/limits).
   */
  limit?: RouteLimit | null;
}

/** What the class-admission step did (steps/admit-class.ts). */
export interface ClassAdmission {
  className: string;
  priority: number;
  /**
   * best: its best pod hurt no higher class; moved: another pod did not; wait: no pod can take it now;
   * shed: no pod could, and its class is sheddable; over_objective: none could, served on its best pod anyway.
   */
  action: 'best' | 'moved' | 'wait' | 'shed' | 'over_objective';
  /** Which higher class each refused pod would have hurt, and by how much (bounded, prompt-free). */
  detail: string | null;
  /** With `wait`: when its waiting ends (then it is served or shed). */
  waitUntilMs: number | null;
}

/** What the steps decided about a request, before the router books it on a pod (book.ts). */
export type DecidedRoute = Omit<
  RouteOutcome,
  'target' | 'shed' | 'reservationId' | 'flightId' | 'kvReuseReport' | 'tenant' | 'admission' | 'limit'
>;

/**
 * The outcome of a request the router never saw (e.g. a body the plugin did not read): no model known, no
 * pod, nothing reserved, so Kong's target stays.
 */
export function emptyOutcome(reason: FallbackReason, detail: string): RouteOutcome {
  return {
    target: null,
    decision: { candidates: [], chosen: null, fallbackReason: reason },
    fallbackReason: reason,
    fallbackDetail: detail,
    model: null,
    lora: null,
    promptTokens: 0,
    truncated: false,
    blocks: 0,
    promptChars: { cached: 0, tokenized: 0 },
    timings: zeroTimings(),
    shed: null,
    tenant: null,
    admission: null,
    reservationId: null,
    flightId: null,
    kvReuseReport: false,
  };
}
