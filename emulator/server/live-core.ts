// Drives one emulated engine core (one DP rank) in wall time through the time scale, for live serving.
import { performance } from 'node:perf_hooks';
import type { Engine } from '../engine/engine.js';
import type {
  AddRequestResult,
  EngineOutcome,
  EngineRequestInput,
  FinishedRequest,
  TokenOutput,
} from '../engine/types.js';
import type { KvEventPublisher } from './kv-publisher.js';

export interface RequestListener {
  onToken(t: TokenOutput): void;
  onFinish(f: FinishedRequest): void;
  /** The engine went away (restart or shutdown) before the request finished. */
  onError(message: string): void;
}

export interface LiveCoreOptions {
  engine: Engine;
  /** Engine ms per wall ms: 10 runs the emulated GPU 10× faster than real time. */
  timeScale: number;
  publisher: KvEventPublisher | null;
  onOutcome?: (o: EngineOutcome) => void;
}

/**
 * The live driver of one engine core (one DP rank): maps wall time to engine time through the time scale,
 * keeps one timer for the engine's next step boundary, and fans outcomes out to HTTP listeners, the
 * KV-event publisher and the metrics. The engine itself stays a pure state machine.
 */
export class LiveEngineCore {
  readonly engine: Engine;
  readonly #o: LiveCoreOptions;
  readonly #wallStart = performance.now();
  readonly #listeners = new Map<string, RequestListener>();
  #timer: NodeJS.Timeout | null = null;
  #timerAt = Number.POSITIVE_INFINITY;
  #closed = false;

  constructor(o: LiveCoreOptions) {
    this.#o = o;
    this.engine = o.engine;
  }

  /** Current engine time (ms), never behind the engine's clock. */
  nowMs(): number {
    return Math.max(this.engine.clockMs, (performance.now() - this.#wallStart) * this.#o.timeScale);
  }

  /** vLLM's DP load-balancing score: waiting × 4 + running. */
  get loadScore(): number {
    return this.engine.numWaiting * 4 + this.engine.numRunning;
  }

  submit(input: EngineRequestInput, listener: RequestListener): AddRequestResult {
    if (this.#closed) return { ok: false, reason: 'engine_dead', message: 'engine is shutting down' };
    const r = this.engine.addRequest(input, this.nowMs());
    if (r.ok) this.#listeners.set(input.id, listener);
    this.#tick();
    return r;
  }

  abort(id: string): void {
    if (this.#closed || !this.#listeners.has(id)) return;
    this.#listeners.delete(id);
    this.engine.abortRequest(id, this.nowMs());
    this.#tick();
  }

  /** Publishes nothing by itself: the AllBlocksCleared goes out with the next step's batch, as in vLLM. */
  resetPrefixCache(): boolean {
    const ok = this.engine.resetPrefixCache(this.nowMs());
    this.#tick();
    return ok;
  }

  #tick = (): void => {
    this.#timer = null;
    this.#timerAt = Number.POSITIVE_INFINITY;
    if (this.#closed) return;
    for (const o of this.engine.advanceTo(this.nowMs())) this.#dispatch(o);
    this.#arm();
  };

  #arm(): void {
    const next = this.engine.nextEventTimeMs();
    if (next === null || next >= this.#timerAt) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    const wallDelay = next / this.#o.timeScale - (performance.now() - this.#wallStart);
    this.#timerAt = next;
    this.#timer = setTimeout(this.#tick, Math.max(0, wallDelay));
  }

  #dispatch(o: EngineOutcome): void {
    // vLLM publishes a step's KV events after the step, stamped with time.time().
    this.#o.publisher?.publish(o.kvEvents, Date.now() / 1000);
    this.#o.onOutcome?.(o);
    if (o.kind === 'step') for (const t of o.tokens) this.#listeners.get(t.requestId)?.onToken(t);
    for (const f of o.finished) {
      const l = this.#listeners.get(f.requestId);
      this.#listeners.delete(f.requestId);
      l?.onFinish(f);
    }
  }

  /** Stops the timer and fails every open request (the engine process is going away). */
  close(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    const open = [...this.#listeners.values()];
    this.#listeners.clear();
    for (const l of open) l.onError(reason);
  }
}
