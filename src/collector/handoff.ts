// The record a cleanly stopping collector leaves per stream so the next one resumes instead of clearing.
import { REFCOUNT_MAX } from '../index/index.js';
import type { MapperSnapshot } from './key-mapper.js';

/**
 * What a collector that stops cleanly leaves for the next one, per pod stream (HandoffStore.saveHandoff): enough
 * to go on from the last batch it applied instead of clearing the pod. The next collector asks the pod's
 * replay buffer from that batch, exactly as after a reconnection: the same bytes there, it is the same
 * engine process and only the batches after it are missing; anything else (a gap, a restart) is handled as
 * the running collector would. The index checks that nothing was written to the pod in between.
 */
export interface StreamHandoff {
  v: typeof HANDOFF_VERSION;
  /** The stream it describes: a handoff for another endpoint, topic or block size is not used. */
  model: string;
  podId: string;
  endpoint: string;
  topic: string;
  blockSize: number;
  /** The last batch applied, its publisher timestamp (s), and the digests of the batches before it. */
  lastSeq: number;
  lastTsSec: number | null;
  window: [number, string][];
  /** The replay buffer has answered with batches (it keeps them: vLLM buffer_steps > 0). */
  bufferKeeps: boolean;
  partialSinceMs: number;
  /** The engine's process_start_time_seconds as last scraped: a new one means it restarted meanwhile. */
  processStartSec: number | null;
  mapper: MapperSnapshot;
  savedAtMs: number;
}

export const HANDOFF_VERSION = 1;

export function encodeHandoff(h: StreamHandoff): string {
  return JSON.stringify(h);
}

export type HandoffDecode = { ok: true; handoff: StreamHandoff } | { ok: false; detail: string };

const HASH = /^(?:[0-9a-f]+|[0-9]+)$/;
const KEY = /^[0-9a-f]{16}$/;

class Bad extends Error {}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Bad(what);
}

const isInt = (v: unknown, min = 0): v is number => Number.isSafeInteger(v) && (v as number) >= min;
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isCount = (v: unknown): boolean => isInt(v) && (v as number) <= REFCOUNT_MAX;

/** Parses and checks a handoff field by field: one written by another version, or damaged, is refused. */
export function decodeHandoff(text: string): HandoffDecode {
  let h: Record<string, unknown>;
  try {
    const v = JSON.parse(text) as unknown;
    check(typeof v === 'object' && v !== null && !Array.isArray(v), 'not an object');
    h = v as Record<string, unknown>;
  } catch (e) {
    return { ok: false, detail: e instanceof Bad ? e.message : 'not JSON' };
  }
  try {
    check(h.v === HANDOFF_VERSION, `version ${String(h.v)}, not ${HANDOFF_VERSION}`);
    for (const f of ['model', 'podId', 'endpoint', 'topic'] as const) check(typeof h[f] === 'string', f);
    check(isInt(h.blockSize, 1), 'blockSize');
    check(isInt(h.lastSeq), 'lastSeq');
    check(h.lastTsSec === null || isNum(h.lastTsSec), 'lastTsSec');
    check(typeof h.bufferKeeps === 'boolean', 'bufferKeeps');
    check(isInt(h.partialSinceMs), 'partialSinceMs');
    check(h.processStartSec === null || isNum(h.processStartSec), 'processStartSec');
    check(isInt(h.savedAtMs), 'savedAtMs');
    check(Array.isArray(h.window), 'window');
    for (const w of h.window as unknown[])
      check(Array.isArray(w) && w.length === 2 && isInt(w[0]) && typeof w[1] === 'string', 'window entry');
    const m = h.mapper as Record<string, unknown> | null;
    check(typeof m === 'object' && m !== null, 'mapper');
    check(
      Array.isArray(m!.otherGroups) && (m!.otherGroups as unknown[]).every((g) => isInt(g)),
      'otherGroups',
    );
    check(Array.isArray(m!.entries), 'entries');
    for (const e of m!.entries as unknown[]) {
      check(Array.isArray(e) && e.length === 5, 'entry shape');
      const [hash, key, gpu, cpu, storage] = e as unknown[];
      check(typeof hash === 'string' && HASH.test(hash), 'entry hash');
      check(key === null || (typeof key === 'string' && KEY.test(key)), 'entry key');
      check(isCount(gpu) && isCount(cpu) && isCount(storage), 'entry counts');
      check(key !== null || (gpu === 0 && cpu === 0 && storage === 0), 'counts on an unindexable entry');
    }
  } catch (e) {
    if (e instanceof Bad) return { ok: false, detail: e.message };
    throw e;
  }
  return { ok: true, handoff: h as unknown as StreamHandoff };
}

/** Why a valid handoff does not describe this stream, or null when it does. */
export function handoffMismatch(
  h: StreamHandoff,
  s: { model: string; podId: string; endpoint: string; topic: string; blockSize: number },
): string | null {
  for (const f of ['model', 'podId', 'endpoint', 'topic', 'blockSize'] as const)
    if (h[f] !== s[f]) return `${f} was ${JSON.stringify(h[f])}, is ${JSON.stringify(s[f])}`;
  return null;
}
