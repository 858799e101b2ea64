// The predict step: each pod's predicted TTFT with credit, reservations, correction and the ITL guard.
import { predictTtft, type Prediction } from '../../core/predictor.js';
import type { BlockKey, PodLookup, Reservation } from '../../core/types.js';
import type { PluginConfig } from '../../config/plugin-config.js';
import type { RouterMemory } from '../memory.js';

export interface PredictInput {
  pods: readonly PodLookup[];
  /** The prompt's block keys; none when routing on load alone (a fallback). */
  keys: readonly BlockKey[];
  promptTokens: number;
  /** The request's max_tokens (the ITL guard's answer length), null when unknown. */
  maxTokens: number | null;
  /** The other Kong nodes' reservations per pod (lookup.ts), null when not shared or not read. */
  others: ReadonlyMap<string, Reservation[]> | null;
  nowMs: number;
}

export interface Predicted {
  /** One per pod, in the pods' order. */
  predictions: Prediction[];
  /** Pods kept out after a recent upstream failure (their predictions say so and are marked unhealthy). */
  skipped: Set<string>;
}

/** Within kv_reuse_reports_ms of a pod's partial rebuild: its requests ask for reuse reports. */
export function reportsReuse(
  config: Pick<PluginConfig, 'kv_reuse_reports_ms'>,
  partialSinceMs: number,
  nowMs: number,
): boolean {
  const w = config.kv_reuse_reports_ms;
  return w > 0 && partialSinceMs > 0 && nowMs - partialSinceMs < w;
}

/**
 * Cached credit the index cannot show yet or any more, with the reason, or null: a prompt this router sent
 * to a pod that has not answered yet will be cached there before the pod reaches a request queued behind
 * it, but its KV events arrive only after its prefill; and after a partial rebuild (partialSinceMs, within
 * kv_reuse_reports_ms) the index lost what the pod cached before, which this router's own sends recall.
 */
export function creditedPrefix(
  memory: Pick<RouterMemory, 'config' | 'reservations' | 'sends'>,
  pod: PodLookup,
  keys: readonly BlockKey[],
  nowMs: number,
): { pod: PodLookup; reason: string } | null {
  const b = pod.prefixBlocks;
  const pending = memory.reservations.pendingPrefixBlocks(pod.state.podId, keys, nowMs);
  const remembered = reportsReuse(memory.config, pod.state.partialSinceMs, nowMs)
    ? memory.sends.prefixBlocks(pod.state.podId, keys)
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

/**
 * Marks the pods kept out after a recent upstream failure: unhealthy for this decision, with the reason
 * in their prediction. Returns their ids (choose ranks them last when no pod is left).
 */
export function markSkipped(
  memory: Pick<RouterMemory, 'failures'>,
  predictions: Prediction[],
  nowMs: number,
): Set<string> {
  const out = new Set<string>();
  for (const p of predictions) {
    const s = memory.failures.skip(p.podId, nowMs);
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

/**
 * The predict step: each pod's TTFT (core/predictor.ts) with the cached credit the index cannot show yet,
 * this router's and the other nodes' reservations, the pod's latency correction and the ITL guard's verdict;
 * then the pods kept out after upstream failures are marked.
 */
export function predictPods(
  memory: Pick<RouterMemory, 'config' | 'reservations' | 'sends' | 'correction' | 'itl' | 'failures'>,
  input: PredictInput,
): Predicted {
  const { config, reservations, correction, itl } = memory;
  const { keys, promptTokens, maxTokens, others, nowMs } = input;
  const credits = input.pods.map((pod) => creditedPrefix(memory, pod, keys, nowMs));
  const predictions = input.pods.map((pod, i) => {
    pod = credits[i]?.pod ?? pod;
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
      // Admission control on (the ITL guard): a pod still prefilling must not look free.
      backlogAttention: itl !== null,
    });
    itl?.assess({ pod, prediction, reservations: active, promptTokens, maxTokens, nowMs });
    return prediction;
  });
  credits.forEach((c, i) => c && predictions[i]!.reasons.push(c.reason));
  return { predictions, skipped: markSkipped(memory, predictions, nowMs) };
}
