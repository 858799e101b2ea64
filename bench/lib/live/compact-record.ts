// The compact per-request record bench:live keeps of each mode, enough to pair and diff them.
import type { RequestRecord } from '../types.js';

/** One request of a live or DES run, as bench:live keeps it: enough to pair and diff the two modes. */
export interface CompactRecord {
  key: string;
  turn: number;
  /** The pod it went to ('gateway' when the live gateway chose; '' when the gateway answered 429). */
  pod: string;
  status: RequestRecord['status'];
  startMs: number;
  ttftMs: number | null;
  endMs: number | null;
  promptTokens: number;
  cachedTokens: number;
}

const ms = (x: number): number => Math.round(x * 10) / 10;

export function compactRecord(r: RequestRecord): CompactRecord {
  return {
    key: r.key,
    turn: r.turnIndex,
    pod: r.pod,
    status: r.status,
    startMs: ms(r.startMs),
    ttftMs: r.firstTokenMs === null ? null : ms(r.firstTokenMs - r.startMs),
    endMs: r.endMs === null ? null : ms(r.endMs),
    promptTokens: r.promptTokens,
    cachedTokens: r.cachedTokens,
  };
}
