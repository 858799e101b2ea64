// Each model's context window: the plugin config's max_model_len, else the one its pods reported last lookup.
import type { PodLookup } from '../core/types.js';
import { configEntry } from './config-entry.js';

/**
 * The context window per model that tokenization is cut at. The config's `max_model_len` wins; a model it
 * does not list takes the smallest max_model_len its healthy pods report (the collector reads it from each
 * pod's /v1/models into the pod state), as the last lookup of the model returned it: tokenization happens
 * before the lookup, so a request uses what the one before it found. A prompt prepared before any lookup of
 * its model has the config's window alone; the router checks it against the window right after the lookup.
 */
export class ContextWindows {
  readonly #configured: Readonly<Record<string, number>> | undefined;
  /** From the pods, per model the config does not list; only models with pods in the index get an entry. */
  readonly #learned = new Map<string, number>();
  /** The merged table a decision worker gets, rebuilt only when a learned window changes. */
  #table: Readonly<Record<string, number>> | null;

  constructor(configured: Readonly<Record<string, number>> | undefined) {
    this.#configured = configured;
    this.#table = configured ?? null;
  }

  /** The window of `model`: configured, else learned, else undefined (cut at max_prompt_tokens only). */
  of(model: string): number | undefined {
    return configEntry(this.#configured, model) ?? this.#learned.get(model);
  }

  /**
   * Every window, configured and learned, as the decision workers' settings take it (`maxModelLen`); null
   * when there is none. The same object until a window changes.
   */
  table(): Readonly<Record<string, number>> | null {
    return this.#table;
  }

  /**
   * Takes the windows a lookup's pods report: the smallest over the healthy pods that report one (over
   * every pod that does when none of those is healthy); a lookup whose pods report none forgets the model's.
   * Returns the model's window now.
   */
  learn(model: string, pods: readonly PodLookup[]): number | undefined {
    if (configEntry(this.#configured, model) === undefined) {
      let healthy = Infinity;
      let any = Infinity;
      for (const { state } of pods)
        if (state.maxModelLen > 0) {
          any = Math.min(any, state.maxModelLen);
          if (state.healthy) healthy = Math.min(healthy, state.maxModelLen);
        }
      const w = Number.isFinite(healthy) ? healthy : Number.isFinite(any) ? any : undefined;
      if (w !== this.#learned.get(model)) {
        if (w === undefined) this.#learned.delete(model);
        else this.#learned.set(model, w);
        this.#table = this.#merged();
      }
    }
    return this.of(model);
  }

  #merged(): Readonly<Record<string, number>> | null {
    if (this.#learned.size === 0) return this.#configured ?? null;
    const out: Record<string, number> = Object.create(null) as Record<string, number>;
    for (const [model, w] of this.#learned) out[model] = w;
    if (this.#configured) for (const [model, w] of Object.entries(this.#configured)) out[model] = w;
    return out;
  }
}
