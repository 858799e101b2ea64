// The book step: the chosen pod as Kong's target, its work reserved, the request's flight recorded.
import { dataParallelRankOf, type BlockKey } from '../../core/types.js';
import { splitAddress } from '../address.js';
import type { Tenant } from '../../policies/index.js';
import type { RouterMemory } from '../memory.js';
import type { DecidedRoute, RouteOutcome, RouteTarget } from '../outcome.js';
import { SEND_MEMORY_STRIDE } from '../send-memory.js';
import type { Prediction } from '../../core/predictor.js';
import type { ReservedClass } from '../reservations.js';
import { reportsReuse } from './predict.js';

/** What booking needs of a request routed on its cache (a fallback has none). */
export interface BookedRequest {
  keys: readonly BlockKey[];
  maxTokens: number | null;
  hasVllmXargs: boolean;
}

export interface BookInput {
  route: DecidedRoute;
  shed: RouteOutcome['shed'];
  /** The prefill the chosen pod is expected to do (its uncached tokens; the whole prompt on a fallback). */
  uncachedTokens: number;
  request: BookedRequest | null;
  nowMs: number;
  /** The request's tenant (policies only): its class is booked with the reservation. */
  tenant?: Tenant | null;
}

export type Booking = Pick<RouteOutcome, 'target' | 'reservationId' | 'flightId' | 'kvReuseReport'>;

/**
 * The book step: the chosen pod as Kong's target (unless shed), with the predicted work reserved on it (and
 * shared with the other Kong nodes), the ITL guard's record of the request in flight, the prompt remembered
 * for a later partial rebuild, and whether to ask the pod for a reuse report. Nothing when no pod is chosen.
 */
export function bookTarget(
  memory: Pick<
    RouterMemory,
    'config' | 'reservations' | 'shared' | 'itl' | 'sends' | 'lastKnownPods' | 'classes'
  >,
  input: BookInput,
): Booking {
  const { config, reservations, shared, itl, sends, lastKnownPods } = memory;
  const { route, shed, uncachedTokens, request, nowMs } = input;
  const keys = request?.keys ?? [];
  const maxTokens = request?.maxTokens ?? null;
  const chosen = route.decision.chosen;
  const addr = chosen && !shed ? splitAddress(chosen.address) : null;
  if (!addr || !chosen) return { target: null, reservationId: null, flightId: null, kvReuseReport: false };
  const reserved = { podId: chosen.podId, atMs: nowMs, uncachedTokens, promptTokens: route.promptTokens };
  const cls = input.tenant && memory.classes ? bookClass(memory, chosen, input.tenant, nowMs) : undefined;
  const reservationId = reservations.add({ ...reserved }, keys, cls?.reserved);
  if (reservationId !== null && shared && route.model !== null)
    shared.share(
      route.model,
      reservationId,
      reserved,
      cls
        ? {
            ...cls.reserved,
            ownMs: cls.ownMs,
            ...(memory.classes?.activity.ownSqueezed(cls.reserved.priority, nowMs) ? { squeezed: true } : {}),
          }
        : undefined,
    );
  const flightId = itl ? itl.record(chosen, nowMs, route.promptTokens, maxTokens) : null;
  const rank = dataParallelRankOf(chosen.podId);
  const target: RouteTarget = {
    ...addr,
    podId: chosen.podId,
    ...(rank !== null ? { dataParallelRank: rank } : {}),
  };
  if (keys.length > 0 && config.kv_reuse_reports_ms > 0) {
    // About what the pod's KV cache holds, when the collector has said.
    const cap = lastKnownPods.get(route.model ?? '')?.find((p) => p.podId === target.podId)?.kvCapacityTokens;
    sends.record(
      target.podId,
      keys,
      cap ? Math.ceil(cap / (config.block_size * SEND_MEMORY_STRIDE)) : undefined,
    );
  }
  const kvReuseReport =
    request !== null && !request.hasVllmXargs && reportsReuse(config, chosen.partialSinceMs, nowMs);
  if (kvReuseReport)
    chosen.reasons.push(
      `index rebuilt without the pod's whole event history ${Math.round((nowMs - chosen.partialSinceMs) / 1000)} s ago: asking it to report the cached blocks this request reuses`,
    );
  return { target, reservationId, flightId, kvReuseReport };
}

/**
 * Class bookkeeping of a request placed on a pod (policies only): the pod now protects its class for a while
 * (class-activity.ts), and the higher-class requests pending there are expected to be later by its prefill.
 * Returns the class to book with its reservation, and the request's own work (shared with the other nodes).
 */
function bookClass(
  memory: Pick<RouterMemory, 'reservations' | 'classes'>,
  chosen: Prediction,
  tenant: Tenant,
  nowMs: number,
): { reserved: ReservedClass; ownMs: number } {
  const c = tenant.serviceClass;
  const added = (chosen.prefillMs + chosen.loadMs) * chosen.ttftFactor;
  const ownMs = added + chosen.overheadMs * chosen.ttftFactor;
  const cls = { priority: c.priority, objectiveMs: c.ttft_objective_ms, ownMs };
  memory.classes?.activity.record(chosen.podId, cls, nowMs);
  memory.classes?.activity.judge(cls, chosen.predictedTtftMs, nowMs, true);
  for (const r of memory.reservations.active(chosen.podId, nowMs)) {
    const rc = memory.reservations.classOf(r);
    if (rc && rc.priority > c.priority && nowMs - r.atMs < rc.expectedTtftMs) rc.expectedTtftMs += added;
  }
  return {
    reserved: {
      priority: c.priority,
      objectiveMs: c.ttft_objective_ms,
      expectedTtftMs: chosen.predictedTtftMs,
    },
    ownMs,
  };
}
