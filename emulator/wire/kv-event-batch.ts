// Encodes a KVEventBatch exactly as vLLM's msgspec encoder does, in map or array form.
import { blockHashToBytes, blockHashToU64 } from '../engine/block-hash.js';
import type { EngineBlockHash, KvCacheEvent } from '../engine/types.js';
import { MsgpackWriter } from './msgpack-writer.js';

/**
 * Encodes a KVEventBatch exactly as vLLM's msgspec encoder does (docs/collector.md#wire-format):
 * - batch: always positional `[ts, events, data_parallel_rank]`, ts a float64 of epoch seconds;
 * - `map` (vLLM ≥ 0.24, #42892): each event a map tagged by `type` first, fields in declaration order,
 *   optional fields that equal their default omitted (omit_defaults) — so BlockStored writes extra_keys,
 *   group_idx 0 and kv_cache_spec_kind "full_attention" but not kv_cache_spec_sliding_window;
 * - `array` (legacy array_like, the v0.12–v0.23 field list ending at lora_name): a tagged array with every
 *   field present, nil for None.
 * Hashes are the digest's low 64 bits as uint64 (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, the default) or the
 * raw 32-byte digest as bin (=0).
 */

export type KvEventsFormat = 'map' | 'array';
export type KvEventsHashForm = 'int' | 'bytes';

export interface KvEventBatchOptions {
  format: KvEventsFormat;
  hashForm?: KvEventsHashForm;
  dataParallelRank?: number;
}

const MEDIUM_GPU = 'GPU';
const SPEC_KIND = 'full_attention';

function writeHash(w: MsgpackWriter, h: EngineBlockHash, form: KvEventsHashForm): void {
  if (form === 'int') w.bigint(blockHashToU64(h));
  else w.bin(blockHashToBytes(h));
}

function writeHashes(w: MsgpackWriter, hs: readonly EngineBlockHash[], form: KvEventsHashForm): void {
  w.arrayHeader(hs.length);
  for (const h of hs) writeHash(w, h, form);
}

function writeOptStr(w: MsgpackWriter, s: string | null): void {
  if (s === null) w.nil();
  else w.str(s);
}

function writeOptInt(w: MsgpackWriter, n: number | null): void {
  if (n === null) w.nil();
  else w.int(n);
}

function writeEventMap(w: MsgpackWriter, e: KvCacheEvent, form: KvEventsHashForm): void {
  switch (e.type) {
    case 'BlockStored': {
      w.mapHeader(11);
      w.str('type').str('BlockStored');
      w.str('block_hashes');
      writeHashes(w, e.blockHashes, form);
      w.str('parent_block_hash');
      if (e.parentBlockHash === null) w.nil();
      else writeHash(w, e.parentBlockHash, form);
      w.str('token_ids').arrayHeader(e.tokenIds.length);
      for (const t of e.tokenIds) w.int(t);
      w.str('block_size').int(e.blockSize);
      w.str('lora_id');
      writeOptInt(w, e.loraId);
      w.str('medium').str(MEDIUM_GPU);
      w.str('lora_name');
      writeOptStr(w, e.loraName);
      w.str('extra_keys').arrayHeader(e.extraKeys.length);
      for (const k of e.extraKeys) {
        if (k === null) w.nil();
        else {
          w.arrayHeader(k.length);
          for (const s of k) w.str(s);
        }
      }
      w.str('group_idx').int(0);
      w.str('kv_cache_spec_kind').str(SPEC_KIND);
      return;
    }
    case 'BlockRemoved':
      w.mapHeader(4);
      w.str('type').str('BlockRemoved');
      w.str('block_hashes');
      writeHashes(w, e.blockHashes, form);
      w.str('medium').str(MEDIUM_GPU);
      w.str('group_idx').int(0);
      return;
    case 'AllBlocksCleared':
      w.mapHeader(1).str('type').str('AllBlocksCleared');
      return;
  }
}

function writeEventArray(w: MsgpackWriter, e: KvCacheEvent, form: KvEventsHashForm): void {
  switch (e.type) {
    case 'BlockStored':
      w.arrayHeader(8).str('BlockStored');
      writeHashes(w, e.blockHashes, form);
      if (e.parentBlockHash === null) w.nil();
      else writeHash(w, e.parentBlockHash, form);
      w.arrayHeader(e.tokenIds.length);
      for (const t of e.tokenIds) w.int(t);
      w.int(e.blockSize);
      writeOptInt(w, e.loraId);
      w.str(MEDIUM_GPU);
      writeOptStr(w, e.loraName);
      return;
    case 'BlockRemoved':
      w.arrayHeader(3).str('BlockRemoved');
      writeHashes(w, e.blockHashes, form);
      w.str(MEDIUM_GPU);
      return;
    case 'AllBlocksCleared':
      w.arrayHeader(1).str('AllBlocksCleared');
      return;
  }
}

/** One ZMQ payload frame: msgpack of `[tsSeconds, events, dataParallelRank]`. */
export function encodeKvEventBatch(
  tsSeconds: number,
  events: readonly KvCacheEvent[],
  opts: KvEventBatchOptions,
): Buffer {
  const form = opts.hashForm ?? 'int';
  const w = new MsgpackWriter(256 + events.length * 128);
  w.arrayHeader(3).float64(tsSeconds).arrayHeader(events.length);
  for (const e of events) {
    if (opts.format === 'map') writeEventMap(w, e, form);
    else writeEventArray(w, e, form);
  }
  w.int(opts.dataParallelRank ?? 0);
  return w.toBuffer();
}
