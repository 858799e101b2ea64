// Fixed UTC windows (minute, hour, day): where one starts, when it resets, how long its keys live.
import type { LimitWindow } from '../policies/index.js';

export const WINDOW_MS: Record<LimitWindow, number> = {
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
};

/** A window key outlives its window by this much: a settle at the end of a long answer still finds it. */
export const KEY_MARGIN_MS = 15 * 60_000;

/** The window holding `nowMs`: its start (epoch ms, UTC-aligned: epoch time has no leap seconds) and reset. */
export function windowAt(window: LimitWindow, nowMs: number): { startMs: number; resetMs: number } {
  const len = WINDOW_MS[window];
  const startMs = Math.floor(nowMs / len) * len;
  return { startMs, resetMs: startMs + len };
}

/** Whole seconds until `atMs`, at least 1 (Retry-After and the Reset headers never say 0). */
export function secondsUntil(atMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((atMs - nowMs) / 1000));
}
