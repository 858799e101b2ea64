// Stopwatch: times each routing step into the outcome's RouteTimings, whether it returns or throws.
import { performance } from 'node:perf_hooks';

/** Where one routing decision spent its time, per step (ms); telemetry and `explain` report these. */
export interface RouteTimings {
  parseMs: number;
  templateMs: number;
  tokenizeMs: number;
  keysMs: number;
  lookupMs: number;
  predictMs: number;
  totalMs: number;
}

/** The steps a stopwatch times (totalMs is the whole route). */
export type TimedStep = Exclude<keyof RouteTimings, 'totalMs'>;

export function zeroTimings(): RouteTimings {
  return { parseMs: 0, templateMs: 0, tokenizeMs: 0, keysMs: 0, lookupMs: 0, predictMs: 0, totalMs: 0 };
}

/**
 * Times the steps of one route into its RouteTimings. A step's time is added to its field, whether the step
 * returns, falls back or throws (the span shows where a slow failure spent its time), and a step that runs
 * again (a fallback's load-only lookup) adds to the same field.
 */
export class Stopwatch {
  readonly timings: RouteTimings = zeroTimings();
  readonly #now: () => number;
  readonly #startMs: number;

  /** `now`: a monotonic clock in ms (tests pass their own). */
  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
    this.#startMs = now();
  }

  /** Runs a synchronous step. */
  time<T>(step: TimedStep, run: () => T): T {
    const t = this.#now();
    try {
      return run();
    } finally {
      this.timings[step] += this.#now() - t;
    }
  }

  /** Runs a step that awaits (tokenizer, index). */
  async timeAsync<T>(step: TimedStep, run: () => Promise<T>): Promise<T> {
    const t = this.#now();
    try {
      return await run();
    } finally {
      this.timings[step] += this.#now() - t;
    }
  }

  /** Time since the stopwatch's creation, ms (the decision's time budget). */
  elapsedMs(): number {
    return this.#now() - this.#startMs;
  }

  /** Sets totalMs: from the stopwatch's creation to now. */
  stop(): RouteTimings {
    this.timings.totalMs = this.#now() - this.#startMs;
    return this.timings;
  }
}
