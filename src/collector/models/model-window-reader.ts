// Reads one pod's /v1/models at start and on a slow interval: its max_model_len, written with its state.
import type { Logger } from '../logger.js';
import { MODEL_LIST_MAX_BYTES, modelListWindow, readBounded } from './model-list.js';

/** Until a pod has answered once (not started yet, unreachable), it is asked again this often at most. */
export const MODEL_WINDOW_RETRY_MS = 5000;

export interface ModelWindowReaderOptions {
  /** The pod's /v1/models URL (the origin of its /metrics: vLLM serves both on its API port). */
  url: string;
  /** The pod's model (the served name the router asks for). */
  model: string;
  intervalMs: number;
  timeoutMs: number;
  log: Logger;
  /** A window read (tokens); called on every read that finds one, so a lost write is made good. */
  write(maxModelLen: number): void;
}

/** The /v1/models URL of the server whose /metrics URL is `metricsUrl`, or null when it does not parse. */
export function modelsUrlOf(metricsUrl: string): string | null {
  return URL.canParse(metricsUrl) ? new URL('/v1/models', metricsUrl).href : null;
}

/**
 * Polls one pod's /v1/models: at start, every `intervalMs` after that (vLLM's max_model_len changes only with a
 * restart, and `refresh` reads it again at once then), and every MODEL_WINDOW_RETRY_MS while the pod has never
 * answered. A pod without the endpoint, or whose cards carry no max_model_len, is fine: nothing is written and
 * the router keeps the plugin config's window (or none). Reads are bounded in time and bytes; nothing throws.
 */
export class ModelWindowReader {
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  #inFlight: Promise<void> | null = null;
  /** Some HTTP answer came back once (even a 404): the slow interval applies from then on. */
  #answered = false;
  /** The last problem logged (each is logged once, until a read succeeds). */
  #logged: string | null = null;
  #warnedUnmatched = false;
  /** The last window read, null before one. */
  maxModelLen: number | null = null;

  constructor(readonly opts: ModelWindowReaderOptions) {}

  start(): void {
    this.#schedule(0);
  }

  /** Reads again now (the pod restarted: it may have come back with another --max-model-len). */
  refresh(): void {
    if (this.#stopped || this.#inFlight) return;
    this.#schedule(0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#inFlight;
  }

  #schedule(ms: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      if (this.#stopped) return;
      this.#inFlight = this.readOnce().finally(() => {
        this.#inFlight = null;
        if (!this.#stopped && this.#timer === null)
          this.#schedule(
            this.#answered ? this.opts.intervalMs : Math.min(this.opts.intervalMs, MODEL_WINDOW_RETRY_MS),
          );
      });
    }, ms);
    this.#timer.unref();
  }

  /** One read of /v1/models; the window it finds is written. Never throws. */
  async readOnce(): Promise<void> {
    const { url, model, log } = this.opts;
    let text: string;
    try {
      const res = await fetch(url, {
        signal: AbortSignal.timeout(this.opts.timeoutMs),
        headers: { accept: 'application/json' },
      });
      this.#answered = true;
      if (!res.ok) {
        await res.body?.cancel();
        return this.#problem(`HTTP ${res.status}`, 'no max_model_len from this pod');
      }
      text = await readBounded(res, MODEL_LIST_MAX_BYTES);
    } catch (err) {
      return this.#problem(err instanceof Error ? err.message : String(err), 'read failed', err);
    }
    const found = modelListWindow(text, model);
    if (!found.ok) return this.#problem(found.problem, 'not a vLLM model list');
    if (found.maxModelLen === null)
      return this.#problem('no card carries max_model_len', 'no max_model_len from this pod');
    if (!found.matched && !this.#warnedUnmatched) {
      this.#warnedUnmatched = true;
      log.warn('the pod does not list its model by that name in /v1/models: its window is taken anyway', {
        url,
        model,
        max_model_len: found.maxModelLen,
        check: "vLLM's --served-model-name must be the fleet's model name, or requests for it get 404",
      });
    }
    if (found.maxModelLen !== this.maxModelLen)
      log.info('pod max_model_len read from /v1/models', {
        max_model_len: found.maxModelLen,
        ...(this.maxModelLen !== null ? { was: this.maxModelLen } : {}),
      });
    this.maxModelLen = found.maxModelLen;
    this.#logged = null;
    this.opts.write(found.maxModelLen);
  }

  #problem(problem: string, what: string, err?: unknown): void {
    if (this.#logged === problem) return;
    this.#logged = problem;
    this.opts.log.info(
      `pod /v1/models: ${what}; the router uses the plugin config's max_model_len for its model`,
      { url: this.opts.url, problem, ...(err !== undefined ? { err } : {}) },
    );
  }
}
