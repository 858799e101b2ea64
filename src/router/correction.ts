// TtftCorrection: per-pod online correction of predicted TTFT from the latencies the log phase observes.
import type { PodId } from '../core/types.js';

const ALPHA = 0.1;
const MIN_FACTOR = 0.25;
const MAX_FACTOR = 4;
/** Below this, actual TTFT is dominated by network and HTTP noise: no signal for the model. */
const MIN_PREDICTED_MS = 50;

/**
 * Online calibration from observed latencies: per pod, an EWMA (in log space) of actual / predicted TTFT,
 * applied as a multiplier to that pod's predictions. Bounded so one outlier cannot flip routing for long.
 */
export class TtftCorrection {
  readonly #logFactor = new Map<PodId, number>();
  readonly #samples = new Map<PodId, number>();

  factor(podId: PodId): number {
    return Math.exp(this.#logFactor.get(podId) ?? 0);
  }

  samples(podId: PodId): number {
    return this.#samples.get(podId) ?? 0;
  }

  /** `modelMs` is the prediction before correction (Prediction.modelTtftMs). */
  observe(podId: PodId, modelMs: number, actualMs: number): void {
    if (!(modelMs >= MIN_PREDICTED_MS) || !(actualMs > 0) || !Number.isFinite(actualMs)) return;
    const ratio = Math.min(MAX_FACTOR, Math.max(MIN_FACTOR, actualMs / modelMs));
    const prev = this.#logFactor.get(podId) ?? 0;
    const next = prev + ALPHA * (Math.log(ratio) - prev);
    this.#logFactor.set(podId, Math.min(Math.log(MAX_FACTOR), Math.max(Math.log(MIN_FACTOR), next)));
    this.#samples.set(podId, this.samples(podId) + 1);
  }
}
