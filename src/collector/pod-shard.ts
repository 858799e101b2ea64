// Which collector shard follows a pod: FNV-1a of the pod id (its DP suffix stripped) modulo the shard count.
import { KinferenceError } from '../core/errors.js';

/** `collector.shard_index` of `collector.shard_count`: this collector follows the pods that hash to it. */
export interface PodShard {
  index: number;
  count: number;
}

/** FNV-1a, 32 bits, over the UTF-16 code units: stable across processes, versions and platforms. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The shard (0 … count−1) of a pod. An index pod id of a data-parallel rank (`<pod>@dp<r>`) belongs to its
 * pod's shard: one collector follows every rank of a pod.
 */
export function podShard(podId: string, count: number): number {
  if (!Number.isInteger(count) || count < 1)
    throw new KinferenceError('KINF_ERR_INTERNAL', `shard count must be a positive integer, got ${count}`);
  return count === 1 ? 0 : fnv1a(podId.replace(/@dp\d+$/, '')) % count;
}

/**
 * The lease name part of a shard (`<index>/<count>`), '' for the whole fleet (one shard): the writer lease
 * and the write fence of shard i of n are `<prefix>:{T}:writer:i/n`, so n collectors write one model side
 * by side, each fenced on its own pods' lease.
 */
export function shardLeaseName(shard: PodShard | null | undefined): string {
  return shard && shard.count > 1 ? `${shard.index}/${shard.count}` : '';
}
