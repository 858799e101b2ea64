/** Public API of the KV-location index. Other parts import from here (or create.ts), nothing deeper. */
export {
  REFCOUNT_MAX,
  INDEX_LOSS_REASONS,
  defaultPodState,
  type ApplyId,
  type IndexLossReason,
  type IndexOp,
  type KvIndex,
  type PodRef,
} from './kv-index.js';
export { nextApplyId, processWriterId } from './apply-id.js';
export type { IndexLog } from './redis-connection.js';
export { createKvIndex, type KvIndexOptions } from './create.js';
export { MemoryKvIndex } from './memory-index.js';
export { RedisKvIndex, REDIS_INDEX_DEFAULTS, type RedisKvIndexOptions } from './redis-index.js';
export { DEFAULT_KEY_PREFIX, modelKeyBase } from './redis-keys.js';
export { gallopPrefix, tierPrefixes } from './prefix-search.js';
export type { PodStatePatch } from './pod-state-codec.js';
export {
  LeaseLostError,
  RedisWriterLease,
  describeLeaseHolder,
  formatLeaseHolder,
  thisProcessHolder,
  type LeaseAcquireResult,
  type LeaseConflict,
  type LeaseHolder,
  type LeaseRenewResult,
  type RedisWriterLeaseOptions,
  type WriterLease,
} from './writer-lease.js';
