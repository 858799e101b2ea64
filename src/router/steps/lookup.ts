// The lookup step: one index round trip for the prompt's keys under the router's deadline.
import { boundedDetail } from '../../core/bounded-detail.js';
import { isKinferenceError } from '../../core/errors.js';
import type { BlockKey, LookupResult, PodLookup } from '../../core/types.js';
import type { OtherReservation } from '../shared-reservations.js';
import type { IndexReader } from '../../index/index.js';
import { routable } from '../address.js';
import type { RouterMemory } from '../memory.js';
import { StepFallback } from './step-fallback.js';

/**
 * The first lookup of a router also opens the Redis connection and loads the script: it gets this much
 * time at least, so the first request after a deploy is routed on the index rather than failing open.
 */
export const FIRST_LOOKUP_BUDGET_MS = 1000;

export class LookupTimeout extends Error {}

export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LookupTimeout(`index lookup over ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** The index's lookups under the router's deadline (the first one, which also connects, gets longer). */
export class IndexDeadline {
  #lookedUp = false;

  constructor(
    readonly index: IndexReader,
    readonly timeoutMs: number,
  ) {}

  async lookup(model: string, keys: readonly BlockKey[]): Promise<LookupResult> {
    const budget = this.#lookedUp ? this.timeoutMs : Math.max(this.timeoutMs, FIRST_LOOKUP_BUDGET_MS);
    try {
      return await withTimeout(this.index.lookup(model, keys), budget);
    } finally {
      this.#lookedUp = true;
    }
  }
}

export interface FoundPods {
  /** Every pod of the model with its longest cached prefix of the prompt. */
  pods: PodLookup[];
  /** The other Kong nodes' reservations per pod (share_reservations); null when not shared or not read. */
  others: ReadonlyMap<string, OtherReservation[]> | null;
}

/**
 * The lookup step: one index round trip for the prompt's block keys, with the other nodes' reservations read
 * beside it (sent after it, so its reply comes first; without them, ours alone). A failed or late lookup
 * falls back (index_error, index_timeout).
 */
export async function lookupPods(
  memory: Pick<RouterMemory, 'config' | 'index' | 'shared'>,
  model: string,
  keys: readonly BlockKey[],
  nowMs: number,
): Promise<FoundPods | StepFallback> {
  const lookupSent = memory.index.lookup(model, keys);
  const othersRead = memory.shared
    ? withTimeout(memory.shared.others(model, nowMs), memory.config.redis_timeout_ms).catch(() => null)
    : null;
  let lookup: LookupResult;
  try {
    lookup = await lookupSent;
  } catch (e) {
    const timeout = e instanceof LookupTimeout || isKinferenceError(e, 'KINF_ERR_REDIS_TIMEOUT');
    return new StepFallback(timeout ? 'index_timeout' : 'index_error', boundedDetail(e));
  }
  return { pods: lookup.pods, others: await othersRead };
}

/**
 * The pods of the lookup Kong can be sent to (remembered as the model's last known pods), or a fallback when
 * the index has none (no_pods_in_index).
 */
export function routableCandidates(
  memory: Pick<RouterMemory, 'lastKnownPods'>,
  model: string,
  pods: readonly PodLookup[],
): PodLookup[] | StepFallback {
  if (pods.length === 0) return new StepFallback('no_pods_in_index', `no pods registered for model ${model}`);
  const candidates = pods.filter((p) => routable(p.state));
  memory.lastKnownPods.set(
    model,
    candidates.map((p) => p.state),
  );
  if (candidates.length === 0)
    return new StepFallback(
      'no_pods_in_index',
      boundedDetail(
        `no pod of model ${model} has a host:port address: ${pods
          .map((p) => `${p.state.podId} "${p.state.address}"`)
          .join(', ')}`,
      ),
    );
  return candidates;
}
