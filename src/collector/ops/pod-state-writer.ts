// Coalesces a pod's state updates into at most one upsertPodState in flight, with retries.
import { LeaseLostError, type IndexWriter, type PodRef, type PodStatePatch } from '../../index/index.js';

export type { PodStatePatch };

/**
 * Coalesces a pod's state updates: at most one upsertPodState in flight, later patches merged into the
 * next call. State fields are last-writer-wins, so merging loses nothing; a failed write is retried with
 * the next patch (its fields are merged back under anything newer). A write refused by the writer fence
 * (KINF_ERR_LEASE_LOST: another process holds the lease) closes the writer: never retried.
 */
export class PodStateWriter {
  #pending: PodStatePatch | null = null;
  #inFlight: Promise<void> | null = null;
  #closed = false;

  constructor(
    readonly index: IndexWriter,
    readonly pod: PodRef,
    readonly onError: (err: unknown) => void,
  ) {}

  write(patch: PodStatePatch): void {
    if (this.#closed) return;
    this.#pending = this.#pending === null ? { ...patch } : { ...this.#pending, ...patch };
    if (this.#inFlight === null) this.#flush();
  }

  /** Resolves when every patch written so far has been attempted. */
  async settled(): Promise<void> {
    while (this.#inFlight !== null) await this.#inFlight;
  }

  /** Drops pending patches; resolves once a write already sent has settled. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#pending = null;
    await this.settled();
  }

  #flush(): void {
    const patch = this.#pending;
    if (patch === null || this.#closed) return;
    this.#pending = null;
    this.#inFlight = this.index.upsertPodState(this.pod, patch).then(
      () => {
        this.#inFlight = null;
        this.#flush();
      },
      (err: unknown) => {
        this.#inFlight = null;
        if (err instanceof LeaseLostError) {
          this.#closed = true;
          this.#pending = null;
        } else this.#pending = { ...patch, ...(this.#pending ?? {}) };
        this.onError(err);
        // Retry with whatever comes next; don't spin on a dead index.
        if (!this.#closed) setTimeout(() => this.#inFlight === null && this.#flush(), 500).unref();
      },
    );
  }
}
