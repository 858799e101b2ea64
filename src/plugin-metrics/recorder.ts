// In-memory counters and histograms of one plugin-server process, drained into Redis by the flusher.
import type { RouteOutcome } from '../router/index.js';
import {
  MAX_CLASSES,
  MAX_MODELS,
  NO_CLASS,
  NO_MODEL,
  OTHER_MODEL,
  PLUGIN_SERIES,
  bucketOf,
  fieldOf,
  type DecisionOutcome,
  type HistogramPart,
  type SeriesKey,
  type ShedCause,
} from './series.js';

/** How the access phase ended for a request (the decisions' `outcome` label). */
export function decisionOutcome(o: RouteOutcome): DecisionOutcome {
  if (o.shed) return 'shed';
  if (o.limit && !o.limit.verdict.admitted) return 'limited';
  if (o.target) return o.fallbackReason === null ? 'routed' : 'load_only';
  return 'kong_default';
}

/** Prompt tokens the chosen pod serves from its cache: held on GPU, or loaded back from its CPU tier. */
export function predictedCachedTokens(o: RouteOutcome): number {
  const c = o.decision.chosen;
  return c ? Math.min(o.promptTokens, c.cachedTokens + c.cpuTokens) : 0;
}

/**
 * Counts decisions and answers per label set, in memory, until the flusher drains them. Recording one request
 * is a few Map updates, no I/O. Label values are bounded: outcome, reason and cause are closed lists; a model is
 * named only once the fleet served it (a pod was chosen, a candidate found, or it was shed), so a client
 * inventing model names adds nothing but `(other)`; at most MAX_MODELS models and MAX_CLASSES classes per
 * process, the rest `(other)`. Never a tenant or a pod.
 */
export class PluginMetricsRecorder {
  #pending = new Map<string, number>();
  /** Field names by a cheap key: JSON-encoding labels for every sample cost more than the counting. */
  readonly #fields = new Map<string, string>();
  readonly #models = new Set<string>();
  readonly #classes = new Set<string>();

  #add(field: string, v: number): void {
    this.#pending.set(field, (this.#pending.get(field) ?? 0) + v);
  }

  /** fieldOf, memoized (bounded like the fields themselves: by the label caps). */
  #field(series: SeriesKey, labels: readonly string[], part?: HistogramPart): string {
    const key = `${series}\u0000${labels.join('\u0000')}\u0000${part ?? ''}`;
    let f = this.#fields.get(key);
    if (f === undefined) this.#fields.set(key, (f = fieldOf(series, labels, part)));
    return f;
  }

  #model(o: RouteOutcome): string {
    const m = o.model;
    if (m === null) return NO_MODEL;
    if (this.#models.has(m)) return m;
    const served = o.target !== null || o.shed !== null || o.decision.candidates.length > 0;
    if (!served || this.#models.size >= MAX_MODELS) return OTHER_MODEL;
    this.#models.add(m);
    return m;
  }

  #class(o: RouteOutcome): string {
    const c = o.tenant?.serviceClass.name;
    if (c === undefined) return NO_CLASS;
    if (this.#classes.has(c)) return c;
    if (this.#classes.size >= MAX_CLASSES) return '(other)';
    this.#classes.add(c);
    return c;
  }

  #observe(series: SeriesKey, labels: string[], value: number): void {
    const def = PLUGIN_SERIES[series] as { buckets?: readonly number[] };
    this.#add(this.#field(series, labels, bucketOf(value, def.buckets ?? [])), 1);
    this.#add(this.#field(series, labels, 'sum'), value);
    this.#add(this.#field(series, labels, 'count'), 1);
  }

  /** The access phase's decision: outcome and reason, a shed's cause, prompt and cached tokens, route time. */
  decision(o: RouteOutcome): void {
    const model = this.#model(o);
    const cls = this.#class(o);
    const outcome = decisionOutcome(o);
    this.#add(this.#field('decisions', [model, cls, outcome, o.fallbackReason ?? 'none']), 1);
    const cause: ShedCause | null = o.shed
      ? o.shed.byClass
        ? 'class_overload'
        : 'ttft_slo'
      : outcome === 'limited'
        ? 'token_limit'
        : null;
    if (cause) this.#add(this.#field('shed', [model, cls, cause]), 1);
    if (o.target && !o.shed && outcome !== 'limited') {
      this.#add(this.#field('prompt', [model, cls]), o.promptTokens);
      const cached = predictedCachedTokens(o);
      if (cached > 0) this.#add(this.#field('cached', [model, cls]), cached);
    }
    this.#observe('route', [outcome], Math.max(0, o.timings.totalMs) / 1000);
  }

  /**
   * The log phase's TTFT of a streamed 200 answer from the pod the router predicted for: both histograms and
   * their ratio, for the same request. A request without a prediction (routed on load) is not counted.
   */
  ttft(o: RouteOutcome, measuredMs: number): void {
    const predictedMs = o.decision.chosen?.predictedTtftMs;
    if (predictedMs === undefined || !(measuredMs >= 0) || o.fallbackReason !== null) return;
    const labels = [this.#model(o), this.#class(o)];
    this.#observe('ttft', [...labels, 'predicted'], predictedMs / 1000);
    this.#observe('ttft', [...labels, 'measured'], measuredMs / 1000);
    if (predictedMs > 0) this.#observe('ratio', labels, measuredMs / predictedMs);
  }

  /** Counts one of this process's own flushes (or a lost one) with the next batch. */
  count(series: 'flushes' | 'lost'): void {
    this.#add(this.#field(series, []), 1);
  }

  /** The increments since the last drain, and nothing pending after. */
  drain(): Map<string, number> {
    const out = this.#pending;
    this.#pending = new Map();
    return out;
  }

  /** Puts back increments that were never sent (Redis was not connected): the next flush carries them. */
  restore(batch: Map<string, number>): void {
    for (const [f, v] of batch) this.#add(f, v);
  }

  /** Distinct fields waiting for the next flush (bounded by the label caps). */
  get size(): number {
    return this.#pending.size;
  }
}
