// One replay request in progress, as the resync step and the ingest loop both see it.

/** One replay request in progress: stop() cuts it short, and so does a live batch if `liveCancels`. */
export class ReplayRun {
  cancelled = false;
  /** It stopped at its bounds (batches or bytes): the rest is requested again. */
  bounded = false;
  bytes = 0;
  /** A jump inside its answer (the ROUTER dropped batches): it stopped there (after: the last applied). */
  skipped: { after: number | null; got: number } | null = null;
  /** Batches it applied (not our last one, not duplicates). */
  applied = 0;
  /** Replies received: once the ROUTER answers, a live batch no longer cuts the replay short. */
  items = 0;
  #resolve: (v: null) => void = () => {};
  readonly done = new Promise<null>((r) => (this.#resolve = r));

  constructor(readonly liveCancels: boolean) {}

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.#resolve(null);
  }
}
