// Routing without cache knowledge: a fallback ranks the model's pods on load alone, or leaves Kong's target.
import { boundedDetail, DETAIL_MAX_CHARS } from '../../core/bounded-detail.js';
import { choose, type Decision } from '../../core/choose.js';
import type { FallbackReason } from '../../core/fallback.js';
import type { PodState } from '../../core/types.js';
import { defaultPodState } from '../../index/index.js';
import { routable } from '../address.js';
import { configEntry } from '../config-entry.js';
import type { RouterMemory } from '../memory.js';
import type { DecidedRoute, RouteOutcome } from '../outcome.js';
import type { Stopwatch } from '../stopwatch.js';
import { predictPods } from './predict.js';

/** Why the request left the pipeline, and what the steps before had learned of it. */
export interface FallbackContext {
  reason: FallbackReason;
  /** Bounded and prompt-free. */
  detail: string;
  model: string | null;
  lora: string | null;
  promptTokens: number;
  truncated: boolean;
  promptChars: RouteOutcome['promptChars'];
  /** The route's stopwatch: the load-only lookup and prediction add to its lookupMs and predictMs. */
  watch: Stopwatch;
  nowMs: number;
}

/** A fallback's decision, and the prefill it books on the chosen pod (the whole prompt: nothing is known cached). */
export interface FallbackRoute {
  route: DecidedRoute;
  uncachedTokens: number;
}

const NO_PREFIX = { GPU: 0, CPU: 0, STORAGE: 0 } as const;

function staticPods(config: RouterMemory['config'], model: string): PodState[] {
  return (configEntry(config.model_pods, model) ?? []).map((address) => ({
    ...defaultPodState({ model, podId: address }),
    address,
  }));
}

/** Pods to rank on load alone: the index's (one lookup without block keys) or the last seen, else model_pods. */
export async function loadOnlyPods(
  memory: Pick<RouterMemory, 'config' | 'index' | 'lastKnownPods'>,
  reason: FallbackReason,
  model: string,
  watch: Stopwatch,
): Promise<{ pods: PodState[]; indexError: string | null }> {
  const { config, lastKnownPods } = memory;
  // The index just failed or had no pods: do not ask it again on this request.
  // An index that answered with no pods is current: its pods left, so only model_pods stand in.
  if (reason === 'no_pods_in_index') {
    lastKnownPods.delete(model);
    return { pods: staticPods(config, model), indexError: null };
  }
  if (reason === 'index_error' || reason === 'index_timeout') {
    const known = lastKnownPods.get(model);
    return { pods: known && known.length > 0 ? known : staticPods(config, model), indexError: null };
  }
  return watch.timeAsync('lookupMs', async () => {
    try {
      const pods = (await memory.index.lookup(model, [])).pods.map((p) => p.state);
      if (pods.length > 0) lastKnownPods.set(model, pods);
      return { pods: pods.length > 0 ? pods : staticPods(config, model), indexError: null };
    } catch (e) {
      const known = lastKnownPods.get(model);
      return {
        pods: known && known.length > 0 ? known : staticPods(config, model),
        indexError: boundedDetail(e),
      };
    }
  });
}

/**
 * Routing without cache knowledge: rank the model's pods on load alone (healthy ones, and not those kept out
 * after an upstream failure), or leave Kong's target (`fallback: kong-default`, no model, no pod). `commit`
 * (the router's booking) runs in the same turn as the choice: a concurrent request deciding in between would
 * not see this one on its pod.
 */
export async function fallback<T = FallbackRoute>(
  memory: Pick<
    RouterMemory,
    'config' | 'index' | 'lastKnownPods' | 'reservations' | 'sends' | 'correction' | 'itl' | 'failures'
  >,
  ctx: FallbackContext,
  commit: (fell: FallbackRoute) => T = (fell) => fell as T,
): Promise<T> {
  const { reason, detail, model, watch, nowMs } = ctx;
  const empty: Decision = { candidates: [], chosen: null, fallbackReason: reason };
  const route: DecidedRoute = {
    decision: empty,
    fallbackReason: reason,
    fallbackDetail: detail,
    model,
    lora: ctx.lora,
    promptTokens: ctx.promptTokens,
    truncated: ctx.truncated,
    blocks: 0,
    promptChars: ctx.promptChars,
    timings: watch.timings,
  };
  if (memory.config.fallback === 'kong-default' || model === null)
    return commit({ route, uncachedTokens: 0 });
  const loaded = await loadOnlyPods(memory, reason, model, watch);
  const pods = loaded.pods.filter(routable);
  // Two bounded details: the request's own, and the index's.
  if (loaded.indexError !== null)
    route.fallbackDetail = `${detail}; index: ${loaded.indexError}`.slice(0, 2 * DETAIL_MAX_CHARS);
  if (pods.length === 0) return commit({ route, uncachedTokens: 0 });
  const decision = watch.time('predictMs', () => {
    const { predictions, skipped } = predictPods(memory, {
      pods: pods.map((state) => ({ state, prefixBlocks: { ...NO_PREFIX } })),
      keys: [],
      promptTokens: ctx.promptTokens,
      maxTokens: null,
      others: null,
      nowMs,
    });
    return choose(predictions, skipped);
  });
  route.decision = { ...decision, fallbackReason: reason };
  return commit({ route, uncachedTokens: ctx.promptTokens });
}
