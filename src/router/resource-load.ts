// A tokenizer or template load shared per spec: blocking on first use, or in the background (the plugin).
/** A failed tokenizer or template load is tried again only after this long (a fixed file needs no restart). */
export const LOAD_RETRY_MS = 30_000;

/**
 * Thrown by a background resource that is not loaded yet: the request is routed on load alone
 * (`tokenizer_loading`) instead of waiting for it.
 */
export class ResourceLoadingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResourceLoadingError';
  }
}

/** One tokenizer or template: how to load it in the background and, for callers that wait, at once. */
export interface LoadSource<T> {
  /** What is loaded, for the fallback detail: `tokenizer "tiktoken:o200k_base"`. */
  what: string;
  /** Loads without blocking the event loop for long (file reads async, CPU in slices). */
  loadAsync: () => Promise<T>;
  /** Loads at once, on the caller's stack (tools and specs that route right after creating a router). */
  loadSync: () => T;
}

/**
 * A load's state: its value is kept for good, its failure for LOAD_RETRY_MS, during which the same error is
 * thrown again at no cost (a bad 4 MB tokenizer.json was re-read on every request, 5–7 ms each).
 * `get` never waits: while the load runs it throws ResourceLoadingError; `getOrLoad` loads at once when
 * nothing is loading (the pre-background behaviour, kept for tools and specs).
 */
export class ResourceLoad<T> {
  readonly what: string;
  #source: LoadSource<T>;
  #clock: () => number;
  #value: { v: T } | null = null;
  #failed: { error: unknown; atMs: number } | null = null;
  #pending: { startedMs: number; done: Promise<void> } | null = null;

  constructor(source: LoadSource<T>, clock: () => number = Date.now) {
    this.what = source.what;
    this.#source = source;
    this.#clock = clock;
  }

  /** Starts the background load unless it is loaded, loading, or failed within LOAD_RETRY_MS. */
  start(): void {
    if (this.#value || this.#pending) return;
    if (this.#failed && this.#clock() - this.#failed.atMs < LOAD_RETRY_MS) return;
    const startedMs = this.#clock();
    let load: Promise<T>;
    try {
      load = this.#source.loadAsync();
    } catch (e) {
      this.#failed = { error: e, atMs: this.#clock() };
      return;
    }
    const done = load.then(
      (v) => {
        this.#value = { v };
        this.#failed = null;
        this.#pending = null;
      },
      (e: unknown) => {
        this.#failed = { error: e, atMs: this.#clock() };
        this.#pending = null;
      },
    );
    this.#pending = { startedMs, done };
  }

  /** The value; never waits: throws the load's error, or ResourceLoadingError while it loads (and starts it). */
  get(): T {
    if (this.#value) return this.#value.v;
    this.start();
    if (this.#pending) {
      const retry = this.#failed ? ` (retrying after: ${errorText(this.#failed.error)})` : '';
      throw new ResourceLoadingError(
        `${this.what} still loading, ${Math.round(this.#clock() - this.#pending.startedMs)} ms since it started${retry}`,
      );
    }
    throw this.#failed!.error;
  }

  /** The value, loaded at once on this stack if nothing is loading (a running background load is not waited for). */
  getOrLoad(): T {
    if (this.#value) return this.#value.v;
    if (this.#pending) return this.get();
    if (this.#failed && this.#clock() - this.#failed.atMs < LOAD_RETRY_MS) throw this.#failed.error;
    try {
      this.#value = { v: this.#source.loadSync() };
      this.#failed = null;
      return this.#value.v;
    } catch (e) {
      this.#failed = { error: e, atMs: this.#clock() };
      throw e;
    }
  }

  /** Settles when no load is running (at once if none is): for specs, benchmarks and diagnostics. */
  settled(): Promise<void> {
    return this.#pending?.done ?? Promise.resolve();
  }

  get state(): 'loaded' | 'loading' | 'failed' | 'idle' {
    return this.#value ? 'loaded' : this.#pending ? 'loading' : this.#failed ? 'failed' : 'idle';
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * `load` once; its value is kept for good, its failure for LOAD_RETRY_MS, during which the same error is
 * thrown again at no cost. The blocking form of ResourceLoad, for one-off loaders.
 */
export function cachedLoad<T>(load: () => T, clock: () => number = Date.now): () => T {
  const r = new ResourceLoad<T>(
    { what: 'resource', loadSync: load, loadAsync: () => Promise.reject(new Error('blocking only')) },
    clock,
  );
  return () => r.getOrLoad();
}
