// The choose step: the healthy pod with the lowest predicted TTFT, or none with `fallback: kong-default`.
import { boundedDetail } from '../../core/bounded-detail.js';
import { choose, type Decision } from '../../core/choose.js';
import type { FallbackReason } from '../../core/fallback.js';
import type { Prediction } from '../../core/predictor.js';
import type { PluginConfig } from '../../config/plugin-config.js';

export interface Choice {
  decision: Decision;
  /** The decision's own reason (no healthy pod, stale index), else prompt_truncated when it was cut. */
  fallbackReason: FallbackReason | null;
  /** Which pods were out and why, when none was healthy. */
  fallbackDetail: string | null;
}

/** Why no pod could be chosen as healthy: each pod and what is wrong with it (bounded). */
function unhealthyDetail(predictions: readonly Prediction[], skipped: ReadonlySet<string>): string {
  const each = predictions.map((p) =>
    skipped.has(p.podId) ? `${p.podId} upstream failures` : `${p.podId} unhealthy (collector)`,
  );
  return boundedDetail(`no healthy pod: ${each.join(', ')}`);
}

/**
 * The choose step: the pod with the lowest predicted TTFT among the healthy ones (core/choose.ts). With no
 * healthy pod and `fallback: kong-default`, none: the service url is a better bet than a pod known to be down.
 */
export function choosePod(
  config: Pick<PluginConfig, 'fallback'>,
  predictions: readonly Prediction[],
  skipped: ReadonlySet<string>,
  truncated: boolean,
): Choice {
  let decision = choose(predictions, skipped);
  const fallbackReason = decision.fallbackReason ?? (truncated ? 'prompt_truncated' : null);
  const unhealthy = fallbackReason === 'all_pods_unhealthy';
  if (unhealthy && config.fallback === 'kong-default') decision = { ...decision, chosen: null };
  return {
    decision,
    fallbackReason,
    fallbackDetail: unhealthy ? unhealthyDetail(predictions, skipped) : null,
  };
}
