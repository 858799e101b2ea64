// The validated KV-cache events (stored, removed, all cleared) the wire decoder hands the key mapper.
import type { Tier, VllmBlockHash } from '../core/types.js';

/**
 * Validated KV-cache events, as the collector's key mapper sees them. Only collector/wire builds these;
 * raw msgpack values never get past it (EXEMPLARS.md, Dynamo: wire types stay at the boundary).
 */

/** One block's vLLM extra_keys, with the LoRA name already taken out (it is also in `loraName`). */
export interface BlockExtraKeys {
  /**
   * Plain strings, in order: vLLM puts cache_salt here, on the first block of a sequence only. Before vLLM
   * #36708 a multimodal identifier was a plain string too (since, an (identifier, offset) tuple: opaque).
   */
  strings: string[];
  /** True when the tuple holds something we cannot fold into our key (multimodal ids, prompt-embed hashes). */
  opaque: boolean;
}

export interface BlockStoredEvent {
  kind: 'stored';
  /** Newly cached full blocks, in prefix order. */
  hashes: VllmBlockHash[];
  /** The block before hashes[0]; null when the run starts at block 0. */
  parent: VllmBlockHash | null;
  /** All tokens of these blocks, concatenated. */
  tokenIds: readonly number[];
  blockSize: number;
  loraName: string | null;
  /** A LoRA adapter is named only by id (vLLM before lora_name existed): its name, part of our key, is unknown. */
  loraNameMissing: boolean;
  tier: Tier;
  /** One entry per block, or null when the producer sends none. */
  extraKeys: (BlockExtraKeys | null)[] | null;
  groupIdx: number | null;
  /** kv_cache_spec_kind ("full_attention", "sliding_window", …); null when not sent. */
  specKind: string | null;
}

export interface BlockRemovedEvent {
  kind: 'removed';
  hashes: VllmBlockHash[];
  tier: Tier;
  groupIdx: number | null;
}

export interface AllBlocksClearedEvent {
  kind: 'cleared';
}

export type KvEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/**
 * Why an event inside an otherwise readable batch was dropped by the decoder. out_of_range: a number of the
 * right type that no engine sends (not finite, not an integer where one is due, or outside its range).
 */
export const INVALID_EVENT_REASONS = [
  'not_tagged',
  'bad_field',
  'unknown_medium',
  'extra_keys_length',
  'out_of_range',
] as const;
export type InvalidEventReason = (typeof INVALID_EVENT_REASONS)[number];

export interface KvEventBatch {
  /** Publisher wall clock (vLLM: time.time()), seconds. */
  tsSec: number;
  events: KvEvent[];
  dataParallelRank: number | null;
  /** Events with a tag we do not know (skipped). */
  unknownEvents: number;
  /** Fields we do not know, in events or the batch (ignored). */
  unknownFields: number;
  /** Events dropped because a known field had the wrong type, by reason. */
  invalidEvents: Partial<Record<InvalidEventReason, number>>;
}

/**
 * Why a whole payload could not be read. out_of_range: `ts` or `data_parallel_rank` is a number no engine
 * sends (a `ts` whose milliseconds are not a finite time between 1970 and MAX_TS_SEC, a rank beyond MAX_DP_RANK).
 */
export const DECODE_ERROR_REASONS = [
  'msgpack',
  'truncated',
  'batch_shape',
  'batch_field',
  'out_of_range',
] as const;
export type DecodeErrorReason = (typeof DECODE_ERROR_REASONS)[number];

export type ParseBatchResult =
  { ok: true; batch: KvEventBatch } | { ok: false; reason: DecodeErrorReason; detail: string };
