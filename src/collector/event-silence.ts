// Notices a KV-event stream that stays silent while its engine computes prompts (wrong topic or endpoint).
import type { EngineMetrics } from './metrics/vllm-metrics.js';

/**
 * Notices a KV-event stream that stays silent while its engine computes prompts: the collector subscribed
 * with a topic vLLM does not publish on (ZMQ drops every message silently), the endpoint points at another
 * port, or vLLM runs without `enable_kv_cache_events`. Nothing else shows it: the SUB socket connects, the
 * index just never learns a block. vLLM publishes a BlockStored for every full block it computes (prefix
 * caching on), so an engine that computed `minUncachedTokens` prompt tokens without one frame arriving is
 * not being heard.
 */

/** What the engine computed, from one counter: the source says which, so a switch does not compare two. */
export interface ComputedTokens {
  source: 'uncached' | 'prompt';
  tokens: number;
}

/** Uncached prompt tokens the engine computed (prefix-cache queries − hits), else all prompt tokens; null. */
export function computedPromptTokens(m: EngineMetrics | null): ComputedTokens | null {
  if (m === null) return null;
  if (m.prefixQueries !== null && m.prefixHits !== null)
    return { source: 'uncached', tokens: m.prefixQueries - m.prefixHits };
  return m.promptTokens === null ? null : { source: 'prompt', tokens: m.promptTokens };
}

export type SilenceVerdict = 'silent' | 'heard' | null;

export class EventSilenceWatch {
  /** The engine's counter when the stream last showed a frame (or at the first scrape); null before. */
  #baseline: ComputedTokens | null = null;
  #framesAtBaseline = 0;
  #warnedAtMs: number | null = null;
  /** When the tokens since the baseline first reached minTokens. */
  #reachedAtMs: number | null = null;

  constructor(
    /** Computed prompt tokens without a frame before the stream counts as silent. */
    readonly minTokens: number,
    /** While it stays silent, how often to say so again. */
    readonly repeatMs: number,
    /**
     * How long minTokens must have stood without a frame. vLLM counts a prompt's prefix-cache query when it
     * schedules it, and stores its first block only when that step ends: a long prompt is counted a step
     * (up to seconds under load) before any event can exist.
     */
    readonly graceMs: number = 5000,
  ) {}

  /** Tokens computed since the stream's last frame (or since watching began); 0 when not comparable. */
  computedSinceFrame(c: ComputedTokens | null): number {
    const b = this.#baseline;
    return b === null || c === null || b.source !== c.source ? 0 : c.tokens - b.tokens;
  }

  /**
   * One scrape: `computed` from computedPromptTokens, `frames` the live frames received so far. 'silent' when
   * a warning is due (first time, then every repeatMs), 'heard' when frames arrive after a warning.
   */
  observe(nowMs: number, computed: ComputedTokens | null, frames: number): SilenceVerdict {
    const b = this.#baseline;
    if (
      frames > this.#framesAtBaseline ||
      computed === null ||
      b === null ||
      b.source !== computed.source ||
      computed.tokens < b.tokens
    ) {
      // A frame arrived (the stream works), or there is nothing to compare yet, or the counter went back (the
      // engine restarted): count again from here.
      const heard = frames > this.#framesAtBaseline && this.#warnedAtMs !== null;
      this.#baseline = computed;
      this.#framesAtBaseline = frames;
      this.#reachedAtMs = null;
      if (heard) this.#warnedAtMs = null;
      return heard ? 'heard' : null;
    }
    if (computed.tokens - b.tokens < this.minTokens) return null;
    this.#reachedAtMs ??= nowMs;
    if (nowMs - this.#reachedAtMs < this.graceMs) return null;
    if (this.#warnedAtMs !== null && nowMs - this.#warnedAtMs < this.repeatMs) return null;
    this.#warnedAtMs = nowMs;
    return 'silent';
  }
}
