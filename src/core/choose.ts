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
const VARIANT = process.env.KF_OVERLOAD ?? '';
const SAT = Number(process.env.KF_SAT ?? '1');
function itlRank(p: Prediction, overloaded: boolean): number {
  if (p.withinItl) return 0;
  if (!overloaded) return 1;
  return p.itlLost ? 1 : 2;
}
export function comparePredictions(a: Prediction, b: Prediction, overloaded = false): number {
  const ra = itlRank(a, overloaded);
  const rb = itlRank(b, overloaded);
  if (ra !== rb) return ra - rb;
  if (overloaded && ra >= 1 && (VARIANT === 'overflow' ? ra === 2 : VARIANT === 'worst')) {
    const d = (b.currentItlMs ?? 0) - (a.currentItlMs ?? 0);
    if (Math.abs(d) > 1e-9) return d;
  }
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
  const overloaded = VARIANT !== '' && isOverloaded(predictions);
  const ranked = [...predictions].sort((a, b) => comparePredictions(a, b, overloaded));
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

function isOverloaded(ps: readonly Prediction[]): boolean {
  if (ps.some((p) => p.withinItl)) return false;
  if (process.env.KF_GATE !== '1') return true;
  let minQ = Infinity;
  let maxP = 0;
  for (const p of ps) {
    minQ = Math.min(minQ, p.queueMs);
    maxP = Math.max(maxP, p.prefillMs);
  }
  return minQ >= SAT * maxP;
}
