// Picks the pod to route to from the per-pod TTFT predictions (healthy first, a total order on ties).
import type { FallbackReason } from './fallback.js';
import type { Prediction } from './predictor.js';

export interface Decision {
  /** Ranked best first. */
  candidates: Prediction[];
  chosen: Prediction | null;
  /** Set when the choice was made without full information. */
  fallbackReason: FallbackReason | null;
}

/** Total order: within the ITL bound first, then lowest predicted TTFT, most cached tokens, least work, pod id. */
export function comparePredictions(a: Prediction, b: Prediction): number {
  if (a.withinItl !== b.withinItl) return a.withinItl ? -1 : 1;
  const d = a.predictedTtftMs - b.predictedTtftMs;
  if (Math.abs(d) > 1e-9) return d;
  if (a.cachedTokens !== b.cachedTokens) return b.cachedTokens - a.cachedTokens;
  const wa = a.running + a.waiting;
  const wb = b.running + b.waiting;
  if (wa !== wb) return wa - wb;
  return a.podId < b.podId ? -1 : a.podId > b.podId ? 1 : 0;
}

/**
 * Picks the pod with the lowest predicted TTFT among healthy pods. If none is healthy, ranks them all
 * anyway (a metrics outage must not take the route down) and says so. `skipped`: pods the router keeps out
 * for a recent upstream failure (their predictions say so and are marked unhealthy); when every pod is out,
 * those rank after the ones the collector alone calls unhealthy, the failure being the gateway's own, fresher
 * view.
 */
export function choose(predictions: readonly Prediction[], skipped?: ReadonlySet<string>): Decision {
  if (predictions.length === 0) return { candidates: [], chosen: null, fallbackReason: 'no_pods_in_index' };
  const ranked = [...predictions].sort(comparePredictions);
  const healthy = ranked.filter((p) => p.healthy);
  if (healthy.length === 0) {
    const out = (p: Prediction): boolean => skipped?.has(p.podId) ?? false;
    const all = [...ranked.filter((p) => !out(p)), ...ranked.filter(out)];
    return { candidates: all, chosen: all[0]!, fallbackReason: 'all_pods_unhealthy' };
  }
  const candidates = [...healthy, ...ranked.filter((p) => !p.healthy)];
  // Pods the collector has not reported yet hold nothing to discount: only known-old data is "stale".
  const stale = healthy.every((p) => p.cacheCredit < 1 && p.indexAgeMs !== null);
  return { candidates, chosen: healthy[0]!, fallbackReason: stale ? 'stale_index' : null };
}
