// The shed step (opt-in): a 429 with Retry-After when the chosen pod is overloaded.
import type { Prediction } from '../../core/predictor.js';
import type { RouteOutcome } from '../outcome.js';
import type { RouterMemory } from '../memory.js';

/**
 * The shed step (admission under overload, opt-in with shed_ttft_slo_ms): a 429 with Retry-After when the
 * chosen pod is over the TTFT bound with a queue to wait out, or the ITL guard refused every pod; else null.
 * Only a decision made with full information sheds (a fallback has no cache knowledge to judge by).
 */
export function shedOverload(
  memory: Pick<RouterMemory, 'config' | 'itl'>,
  chosen: Prediction | null,
  fallbackReason: RouteOutcome['fallbackReason'],
): RouteOutcome['shed'] {
  const { config, itl } = memory;
  if (!(config.shed_ttft_slo_ms > 0 && chosen !== null && fallbackReason === null)) return null;
  // Retry once the best pod is expected to have drained the excess, or (ITL guard) once enough of the
  // prefill sent to it has left the window. Only a queue is worth waiting out: a request over the bound
  // on an empty pod is served (shedding it would protect nobody, and a cold prompt would never run again
  // to refresh an overestimated calibration).
  const unqueuedMs = (chosen.modelTtftMs - chosen.queueMs - chosen.interferenceMs) * chosen.ttftFactor;
  const overTtftMs =
    unqueuedMs > config.shed_ttft_slo_ms ? 0 : Math.max(0, chosen.predictedTtftMs - config.shed_ttft_slo_ms);
  const overItlMs = chosen.withinItl ? 0 : (itl?.retryAfterMs(chosen) ?? 0);
  if (overTtftMs > 0 || !chosen.withinItl)
    return { retryAfterS: Math.max(1, Math.ceil(Math.max(overTtftMs, overItlMs) / 1000)), status: 429 };
  return null;
}
