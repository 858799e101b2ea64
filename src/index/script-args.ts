// Pure KEYS/ARGV builders for the Lua scripts (packed block keys, apply split into bounded calls).
import { KinferenceError } from '../core/errors.js';
import { tierRank, type BlockKey } from '../core/types.js';
import { checkApplyId, formatApplyRecord, type ApplyRecord } from './apply-id.js';
import type { ApplyId, IndexOp } from './kv-index.js';
import { encodePodState, escapeStateValue, type PodStatePatch } from './pod-state-codec.js';
import { appliedKey, podsKey, seqKey, writerLeaseKey } from './redis-keys.js';
import type { ScriptCall } from './script.js';

/**
 * Pure argument builders for the Lua scripts (their KEYS/ARGV layouts are documented in src/index/lua/).
 * Tested without a server (spec/01-unit/index/script-args.spec.ts), then live.
 *
 * The write builders take an optional `fence`: the writer lease holder value the caller expects in the
 * model's lease key (src/index/lua/fence.ts). With it, the lease key is appended to KEYS and the value
 * follows the fixed ARGV; without it (null) the call is exactly the unfenced one.
 */

/**
 * A write fence: the holder value expected in the lease key, and which lease (a collector shard's,
 * 'i/n'; '' or a bare string: the model's one lease).
 */
export type WriteFence = string | { holderValue: string; shard: string };

/** KEYS and ARGV a fence adds to a call's fixed part. */
function fenced(base: string, keys: string[], args: string[], fence: WriteFence | null): ScriptCall {
  if (fence === null) return { keys, args };
  const [value, shard] = typeof fence === 'string' ? [fence, ''] : [fence.holderValue, fence.shard];
  if (value === '') throw new KinferenceError('KINF_ERR_INTERNAL', 'a fence needs a holder value');
  return { keys: [...keys, writerLeaseKey(base, shard)], args: [...args, value] };
}

/** Block keys as 8 raw bytes each, concatenated: 1,000 keys are one 8,000-byte argument. */
export function packBlockKeys(keys: readonly BlockKey[], from = 0, to = keys.length): Buffer {
  const hex = keys.slice(from, to).join('');
  const buf = Buffer.from(hex, 'hex');
  // Buffer.from stops at the first non-hex pair: a length mismatch means a malformed key.
  if (buf.length * 2 !== hex.length || hex.length !== (to - from) * 16)
    throw new KinferenceError('KINF_ERR_INTERNAL', 'block keys must be 16 hex digits each');
  return buf;
}

export function lookupCall(base: string, keys: readonly BlockKey[]): ScriptCall {
  return { keys: [podsKey(base)], args: [base, packBlockKeys(keys)] };
}

const OP_CODE = { store: 's', remove: 'r' } as const;

/** Arguments of the apply script before the (op, keys) pairs (one more in a fenced call). */
export const APPLY_HEAD_ARGS = 7;

/**
 * Splits a batch into as few calls as possible, each carrying at most `maxKeysPerCall` block keys (a
 * huge batch must not block Redis for long: lookups wait behind it). Order is kept; empty ops vanish.
 * The split depends on the ops and `maxKeysPerCall` only, so a retry resends the same calls: all carry
 * `id`, numbered as parts 1..n, and the same `floor` (the last record confirmed for the pod, or null),
 * and the same `fence` (null: none).
 */
export function applyCalls(
  base: string,
  podId: string,
  ttlSeconds: number,
  ops: readonly IndexOp[],
  maxKeysPerCall: number,
  id: ApplyId,
  floor: ApplyRecord | null = null,
  fence: WriteFence | null = null,
): ScriptCall[] {
  if (!Number.isInteger(maxKeysPerCall) || maxKeysPerCall < 1)
    throw new KinferenceError(
      'KINF_ERR_INTERNAL',
      `maxKeysPerCall must be a positive integer, got ${maxKeysPerCall}`,
    );
  checkApplyId(id);
  if (floor) checkApplyId(floor);
  const ttl = String(Math.max(0, Math.floor(ttlSeconds)));
  const floorArg = floor ? formatApplyRecord(floor) : '';
  const head = (): ScriptCall =>
    fenced(
      base,
      [podsKey(base), seqKey(base), appliedKey(base)],
      [base, podId, ttl, id.writer, String(id.seq), String(calls.length + 1), floorArg],
      fence,
    );
  const headArgs = APPLY_HEAD_ARGS + (fence === null ? 0 : 1);
  const calls: ScriptCall[] = [];
  let cur = head();
  let room = maxKeysPerCall;
  const flush = () => {
    if (cur.args.length > headArgs) calls.push(cur);
    cur = head();
    room = maxKeysPerCall;
  };
  for (const op of ops) {
    if (op.op === 'clear') {
      cur.args.push('c', '');
      continue;
    }
    const code = `${OP_CODE[op.op]}${tierRank(op.tier)}`;
    for (let i = 0; i < op.keys.length;) {
      if (room === 0) flush();
      const n = Math.min(room, op.keys.length - i);
      cur.args.push(code, packBlockKeys(op.keys, i, i + n));
      room -= n;
      i += n;
    }
  }
  flush();
  return calls;
}

export function upsertPodCall(
  base: string,
  podId: string,
  patch: PodStatePatch,
  fence: WriteFence | null = null,
): ScriptCall {
  const flat = encodePodState(podId, patch).map((v, i) => (i % 2 === 1 ? escapeStateValue(v) : v));
  const call = fenced(base, [podsKey(base), seqKey(base)], [base, podId], fence);
  call.args.push(...flat);
  return call;
}

export function removePodCall(base: string, podId: string, fence: WriteFence | null = null): ScriptCall {
  return fenced(base, [podsKey(base), appliedKey(base)], [base, podId], fence);
}

/**
 * save-handoff and take-handoff (lua/handoff.ts): the pod, the key the record moves through, a TTL in ms (the
 * saved record's, or the transfer key's on a take), then `more` ARGV (save: the expected apply record).
 */
export function handoffCall(
  base: string,
  podId: string,
  transferKey: string,
  ttlMs: number,
  more: readonly string[],
  fence: WriteFence | null = null,
): ScriptCall {
  return fenced(
    base,
    [podsKey(base), appliedKey(base), transferKey],
    [base, podId, String(ttlMs), ...more],
    fence,
  );
}
