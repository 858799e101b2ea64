/**
 * Public API of the KV-location index: everything outside src/index imports from here, nothing deeper
 * (eslint.config.js enforces it). Callers take the role they use: the router an IndexReader and a
 * ReservationStore, the collector an IndexWriter and a HandoffStore; createKvIndex gives a KvIndex (all
 * four) to whoever owns it.
 */
export {
  REFCOUNT_MAX,
  INDEX_LOSS_REASONS,
  defaultPodState,
  type ApplyId,
  type HandoffStore,
  type HandoffTake,
  type IndexLossReason,
  type IndexOp,
  type IndexReader,
  type IndexWriter,
  type KvIndex,
  type PodRef,
  type ReservationStore,
  type SharedClass,
  type SharedReservation,
} from './kv-index.js';
export { nextApplyId, processWriterId } from './apply-id.js';
export {
  RedisConnection,
  clusterOptions,
  clusterSeeds,
  failFastOptions,
  sentinelOptions,
  redactUrl,
  redisTlsOptions,
  type IndexLog,
  type RedisConnectionOptions,
  type RedisSentinelSettings,
  type RedisTlsSettings,
} from './redis-connection.js';
export { RedisScript } from './script.js';
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
