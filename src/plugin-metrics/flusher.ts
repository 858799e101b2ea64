// Drains a recorder into Redis every few seconds: one MULTI of HINCRBYFLOAT, fail-silent when down.
import type { Cluster, Redis } from 'ioredis';
import type { PluginMetricsRecorder } from './recorder.js';
import { pluginMetricsKey } from './series.js';

/** Default flush interval: a scrape every 15 s sees at most one interval's lag. */
export const DEFAULT_FLUSH_MS = 5000;

export interface FlusherOptions {
  keyPrefix: string;
  intervalMs?: number;
  /** A flush that failed (said once by the caller; the counts are kept or counted as lost). */
  onError?: (e: unknown) => void;
}

/**
 * One per Redis and key prefix in a plugin server. Never per request: the recorder sums in memory, and each
 * interval with something to write sends one MULTI on the one hash (one slot, so a Redis Cluster takes it too),
 * applied atomically (a scrape never sees half a histogram).
 *
 * Redis down: when the client is not connected nothing was sent, and the batch goes back into the recorder (its
 * fields are the same bounded set, so memory stays bounded) for the next flush. A batch that was sent and then
 * failed may or may not have been applied: it is dropped (never counted twice) and counted in
 * metrics_lost_flushes_total.
 */
export class PluginMetricsFlusher {
  readonly #client: Redis | Cluster;
  readonly #recorder: PluginMetricsRecorder;
  readonly #key: string;
  readonly #onError: (e: unknown) => void;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | null = null;
  #inFlight: Promise<boolean> | null = null;

  constructor(client: Redis | Cluster, recorder: PluginMetricsRecorder, o: FlusherOptions) {
    this.#client = client;
    this.#recorder = recorder;
    this.#key = pluginMetricsKey(o.keyPrefix);
    this.#onError = o.onError ?? (() => {});
    this.#intervalMs = o.intervalMs ?? DEFAULT_FLUSH_MS;
  }

  /** Flushes every interval; the timer never keeps the process alive. */
  start(): this {
    if (this.#timer) return this;
    this.#timer = setInterval(() => void this.flush(), this.#intervalMs);
    this.#timer.unref();
    return this;
  }

  /** Writes what the recorder holds; resolves true when it reached Redis (or there was nothing). Never rejects. */
  flush(): Promise<boolean> {
    // One at a time: a slow Redis must not pile up batches.
    this.#inFlight ??= this.#flushOnce().finally(() => (this.#inFlight = null));
    return this.#inFlight;
  }

  async #connected(): Promise<boolean> {
    const c = this.#client;
    if (c.status === 'ready') return true;
    if (c.status !== 'wait') return false;
    try {
      await c.connect();
      return true;
    } catch (e) {
      this.#onError(e);
      return false;
    }
  }

  async #flushOnce(): Promise<boolean> {
    if (this.#recorder.size === 0) return true;
    if (!(await this.#connected())) return false; // kept in the recorder
    this.#recorder.count('flushes');
    const batch = this.#recorder.drain();
    const m = this.#client.multi();
    // HINCRBYFLOAT for every field: a histogram sum once written fractional refuses HINCRBY for good
    // ("hash value is not an integer"), and whole values stay whole ("6", not "6.0").
    for (const [field, v] of batch) m.hincrbyfloat(this.#key, field, Number(v.toPrecision(15)));
    try {
      const res = await m.exec();
      const failed = res?.find(([err]) => err !== null);
      if (res === null || failed) throw failed?.[0] ?? new Error('MULTI aborted');
      return true;
    } catch (e) {
      this.#recorder.count('lost');
      this.#onError(e);
      return false;
    }
  }

  /** Stops the timer and flushes once more, waiting at most `timeoutMs` (an exiting plugin server). */
  async close(timeoutMs = 1000): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    let t: NodeJS.Timeout | undefined;
    await Promise.race([this.flush(), new Promise((r) => (t = setTimeout(r, timeoutMs)))]);
    clearTimeout(t);
  }
}
