// Apply ids (writer id, rising seq) and the per-pod apply record that makes an apply's retry count once.
import { randomBytes } from 'node:crypto';
import { KinferenceError } from '../core/errors.js';
import type { ApplyId, IndexLossReason } from './kv-index.js';

const WRITER_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

let processWriter: string | null = null;
let lastSeq = 0;

/**
 * A fresh ApplyId: one writer per process (random, made on first use), seq counting up across every pod
 * and every apply queue of the process. So a pod whose stream is restarted inside the process keeps
 * growing ids, and a new process (a restarted collector) is another writer.
 */
export function nextApplyId(): ApplyId {
  return { writer: processWriterId(), seq: ++lastSeq };
}

/**
 * This process's writer id (random, 12 characters, made on first use): the `writer` of its apply ids, and
 * the `id` of the writer lease it holds (src/index/writer-lease.ts), so a lease holder named in a log is
 * the writer found in the index's apply records.
 */
export function processWriterId(): string {
  processWriter ??= randomBytes(9).toString('base64url');
  return processWriter;
}

export function checkApplyId(id: ApplyId): void {
  if (!WRITER_PATTERN.test(id.writer) || !Number.isSafeInteger(id.seq) || id.seq < 1)
    throw new KinferenceError(
      'KINF_ERR_INTERNAL',
      `invalid apply id ${JSON.stringify(id)} (writer: 1-64 of A-Z a-z 0-9 _ -; seq: a positive integer)`,
    );
}

/**
 * What the Redis index records per pod after each apply script call (src/index/lua/apply.ts): the id and
 * the part (1-based script call of that apply), "writer:seq:part". Ordered within one writer by
 * (seq, part).
 */
export interface ApplyRecord {
  writer: string;
  seq: number;
  part: number;
}

export function formatApplyRecord(r: ApplyRecord): string {
  return `${r.writer}:${r.seq}:${r.part}`;
}

export function parseApplyRecord(s: string | null | undefined): ApplyRecord | null {
  if (s === null || s === undefined) return null;
  const m = /^([A-Za-z0-9_-]+):(\d+):(\d+)$/.exec(s);
  return m ? { writer: m[1]!, seq: Number(m[2]), part: Number(m[3]) } : null;
}

/** a - b within one writer: negative when a is older. */
export function compareApplyRecords(a: ApplyRecord, b: ApplyRecord): number {
  return a.seq !== b.seq ? a.seq - b.seq : a.part - b.part;
}

/**
 * Did the writes behind `floor` (the last record this process saw confirmed for the pod) survive, given
 * what Redis holds now? null when they did (the record is the floor or a later one of the same writer),
 * else why not. The apply script applies the same rule (lost_reason in src/index/lua/apply.ts).
 */
export function lossReason(stored: ApplyRecord | null, floor: ApplyRecord): IndexLossReason | null {
  if (stored === null) return 'missing';
  if (stored.writer !== floor.writer) return 'overwritten';
  return compareApplyRecords(stored, floor) < 0 ? 'rolled_back' : null;
}
