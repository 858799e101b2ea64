// Builds vLLM KvEventBatch payloads and ZMQ frames as vLLM and msgspec produce them, per version.
import { f64, OrderedMap, encodeMsgspec, type MsgValue } from './msgspec-encoder.js';

/**
 * vLLM KvEventBatch payloads and ZMQ frames, as vllm/distributed/kv_events.py + msgspec produce them, in
 * both encodings (docs/collector.md#wire-format). Field lists are per version: `storedFields` is how many
 * BlockStored fields the emulated vLLM defines (5 in v0.9, 7 up to lora_name, 11 with
 * kv_cache_spec_sliding_window); array mode writes all of them, map mode omits defaults that are None.
 */
export type Hash = bigint | number | Uint8Array;

export interface StoredSpec {
  type: 'BlockStored';
  hashes: Hash[];
  parent: Hash | null;
  tokens: number[];
  blockSize: number;
  loraId?: number | null;
  medium?: string | null;
  loraName?: string | null;
  extraKeys?: (MsgValue[] | null)[] | null;
  groupIdx?: number | null;
  specKind?: string | null;
  slidingWindow?: number | null;
}
export interface RemovedSpec {
  type: 'BlockRemoved';
  hashes: Hash[];
  medium?: string | null;
  groupIdx?: number | null;
}
export interface ClearedSpec {
  type: 'AllBlocksCleared';
}
export type EventSpec = StoredSpec | RemovedSpec | ClearedSpec;

export interface BatchOptions {
  format: 'array' | 'map';
  ts?: number;
  dpRank?: number | null;
  /** BlockStored fields this vLLM version defines (array mode): 5, 6, 7 or 11. Default 7 (array), 11 (map). */
  storedFields?: number;
  /** BlockRemoved fields (array mode): 1, 2 or 3. Default 2 (array), 3 (map). */
  removedFields?: number;
  /** Omit data_parallel_rank from the batch (vLLM before ~0.10). */
  noDpRank?: boolean;
}

const STORED_NAMES = [
  'block_hashes',
  'parent_block_hash',
  'token_ids',
  'block_size',
  'lora_id',
  'medium',
  'lora_name',
  'extra_keys',
  'group_idx',
  'kv_cache_spec_kind',
  'kv_cache_spec_sliding_window',
] as const;
/** Fields with a default (None): omitted in map mode when None. The first 7 have no default. */
const STORED_REQUIRED = 7;

function storedValues(e: StoredSpec): MsgValue[] {
  return [
    e.hashes,
    e.parent,
    e.tokens,
    e.blockSize,
    e.loraId ?? null,
    e.medium === undefined ? 'GPU' : e.medium,
    e.loraName ?? null,
    e.extraKeys === undefined ? null : e.extraKeys,
    e.groupIdx ?? null,
    e.specKind ?? null,
    e.slidingWindow ?? null,
  ];
}

function eventValue(e: EventSpec, o: BatchOptions): MsgValue {
  if (o.format === 'array') {
    if (e.type === 'AllBlocksCleared') return ['AllBlocksCleared'];
    if (e.type === 'BlockRemoved') {
      const vals: MsgValue[] = [e.hashes, e.medium === undefined ? 'GPU' : e.medium, e.groupIdx ?? null];
      return ['BlockRemoved', ...vals.slice(0, o.removedFields ?? 2)];
    }
    return ['BlockStored', ...storedValues(e).slice(0, o.storedFields ?? 7)];
  }
  if (e.type === 'AllBlocksCleared') return new OrderedMap([['type', 'AllBlocksCleared']]);
  if (e.type === 'BlockRemoved') {
    const entries: [string, MsgValue][] = [
      ['type', 'BlockRemoved'],
      ['block_hashes', e.hashes],
      ['medium', e.medium === undefined ? 'GPU' : e.medium],
    ];
    if ((o.removedFields ?? 3) >= 3 && e.groupIdx !== undefined && e.groupIdx !== null)
      entries.push(['group_idx', e.groupIdx]);
    return new OrderedMap(entries);
  }
  const vals = storedValues(e);
  const entries: [string, MsgValue][] = [['type', 'BlockStored']];
  const n = o.storedFields ?? 11;
  for (let i = 0; i < n; i++)
    if (i < STORED_REQUIRED || vals[i] !== null) entries.push([STORED_NAMES[i]!, vals[i]!]);
  return new OrderedMap(entries);
}

/** The msgpack payload of one KVEventBatch: `[ts, events, data_parallel_rank]` (positional in released builds). */
export function encodeBatch(events: EventSpec[], o: BatchOptions): Buffer {
  const batch: MsgValue[] = [f64(o.ts ?? 1700000000.5), events.map((e) => eventValue(e, o))];
  if (!o.noDpRank) batch.push(o.dpRank === undefined ? 0 : o.dpRank);
  return encodeMsgspec(batch);
}

export function seqFrame(seq: number | bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(seq));
  return b;
}

/** The 3 frames of a live message: topic, 8-byte big-endian sequence, payload. */
export function liveFrames(topic: string, seq: number, payload: Buffer): Buffer[] {
  return [Buffer.from(topic, 'utf8'), seqFrame(seq), payload];
}
