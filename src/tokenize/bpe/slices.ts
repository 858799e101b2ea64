// Runs a table build written as a generator to the end at once, or in slices that give the event loop back.
import { setImmediate as nextTurn } from 'node:timers/promises';

/** A build that yields between slices of its work and returns its result. */
export type SlicedBuild<T> = Generator<void, T, void>;

/** Items a build handles between two yields: a few milliseconds of work each. */
export const SLICE_ITEMS = 8192;

/** Runs the build to the end on this stack (the blocking loaders). */
export function runAtOnce<T>(build: SlicedBuild<T>): T {
  for (;;) {
    const step = build.next();
    if (step.done) return step.value;
  }
}

/**
 * Runs the build one slice per event-loop turn: other work (a request on the plugin server) runs between
 * slices instead of waiting for the whole build.
 */
export async function runInSlices<T>(build: SlicedBuild<T>): Promise<T> {
  for (;;) {
    const step = build.next();
    if (step.done) return step.value;
    await nextTurn();
  }
}
