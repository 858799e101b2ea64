// Every Redis key of the index, spelled once: prefix, model tag and the per-model suffixes.
import { createHash } from 'node:crypto';
import { KinferenceError } from '../core/errors.js';

/**
 * Every Redis key of the index, and nothing else, is spelled here (the Lua scripts get the suffixes below
 * interpolated into their source). Layout, for prefix `kinf` and model M:
 *
 *   kinf:{T}:pods        HASH  podId → "idx:epoch"  every pod the index knows for M (apply or upsert)
 *   kinf:{T}:seq         STRING last pod index handed out for M (INCR; never reused)
 *   kinf:{T}:applied     HASH  podId → "writer:seq:part", the last apply script call that ran for the pod
 *                        (src/index/apply-id.ts): retries are skipped, lost writes detected
 *   kinf:{T}:s:<idx>     HASH  pod state; exists only while the pod is registered (upsertPodState)
 *   kinf:{T}:b:<8 bytes> STRING one block: "idx=entry,…", entry = packed (epoch, refcount per tier)
 *                        (src/index/lua/entry.ts); TTL refreshed on store
 *   kinf:{T}:writer      STRING the writer lease: who alone may write M's index (JSON id/host/pid of one
 *                        collector process, src/index/writer-lease.ts); PX TTL, renewed while it runs
 *   kinf:{T}:resv        ZSET  routers' shared reservations (src/index/reservation-member.ts), score atMs;
 *                        PX TTL refreshed on each share
 *   kinf:{T}:h:<idx>     STRING a stopped collector's handoff for the pod (JSON, lua/handoff.ts): read once
 *                        by the next collector; same TTL as blocks
 *   kinf:{T}:hs:<idx>    STRING its stamp: the pod's "idx:epoch|<apply record>" when it was saved
 *   kinf:{T}:ht:<token>  STRING a record on its way in or out, one client's own (1 MB APPENDs / GETRANGEs
 *                        around an O(1) RENAME); PX TTL of a minute, deleted when done
 *
 * T = modelTag(M), a Redis Cluster hash tag: all keys of one model hash to one slot, so every script
 * touches a single slot (docs/redis-index.md says what that means for Cluster).
 */
export const KEY_SUFFIX = {
  pods: 'pods',
  seq: 'seq',
  applied: 'applied',
  state: 's:',
  block: 'b:',
  writer: 'writer',
  reservations: 'resv',
  handoff: 'h:',
  handoffStamp: 'hs:',
  handoffTransfer: 'ht:',
} as const;

export const DEFAULT_KEY_PREFIX = 'kinf';

const KEY_PREFIX_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

export function isValidKeyPrefix(prefix: string): boolean {
  return KEY_PREFIX_PATTERN.test(prefix);
}

/** The prefix, or KINF_ERR_CONFIG naming what is allowed (the index and the writer lease share it). */
export function checkKeyPrefix(prefix: string): string {
  if (!isValidKeyPrefix(prefix))
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `invalid Redis key prefix "${prefix}" (1-64 of A-Z a-z 0-9 _ . : -)`,
    );
  return prefix;
}

/**
 * 48 bits of SHA-1 of the model name, base64url (8 characters, never `{` or `}`): short keys, and a
 * collision between two served model names is out of reach (~2^-48 per pair).
 */
export function modelTag(model: string): string {
  return createHash('sha1').update(model, 'utf8').digest().subarray(0, 6).toString('base64url');
}

/** Every key of a model starts with this; the scripts receive it as ARGV[1]. */
export function modelKeyBase(prefix: string, model: string): string {
  return `${prefix}:{${modelTag(model)}}:`;
}

export function podsKey(base: string): string {
  return base + KEY_SUFFIX.pods;
}

export function seqKey(base: string): string {
  return base + KEY_SUFFIX.seq;
}

export function appliedKey(base: string): string {
  return base + KEY_SUFFIX.applied;
}

export function stateKey(base: string, podIdx: number): string {
  return `${base}${KEY_SUFFIX.state}${podIdx}`;
}

/** The model's writer lease; with `shard` ('i/n', collector.shard_index/shard_count) that shard's own lease. */
export function writerLeaseKey(base: string, shard = ''): string {
  return shard === '' ? base + KEY_SUFFIX.writer : `${base}${KEY_SUFFIX.writer}:${shard}`;
}

export function reservationsKey(base: string): string {
  return base + KEY_SUFFIX.reservations;
}

export function handoffKey(base: string, podIdx: number): string {
  return `${base}${KEY_SUFFIX.handoff}${podIdx}`;
}

/** A record in transfer: `token` is unique to one save or take (random). */
export function handoffTransferKey(base: string, token: string): string {
  return `${base}${KEY_SUFFIX.handoffTransfer}${token}`;
}

/** A block's key: the base, the suffix, then the block key's 8 raw bytes (not 16 hex digits: memory). */
export function blockRedisKey(base: string, keyBytes: Buffer): Buffer {
  return Buffer.concat([Buffer.from(base + KEY_SUFFIX.block, 'utf8'), keyBytes]);
}
