// Decodes one vLLM KV-event payload into validated domain events; never throws.
import type { Tier, VllmBlockHash } from '../../core/types.js';
import type {
  BlockExtraKeys,
  InvalidEventReason,
  KvEvent,
  KvEventBatch,
  ParseBatchResult,
} from '../events.js';
import { isNoParent, normaliseBlockHash } from './block-hash.js';
import { decodeMsgpack } from './msgpack.js';

/**
 * vLLM KV-event payloads (docs/collector.md#wire-format) → validated domain events.
 *
 * Two encodings are in the wild, both produced by msgspec:
 * - array_like (vLLM ≤ ~0.23): each event is `[tag, field1, field2, …]`. msgspec writes EVERY field a
 *   version defines, so the length grows with the version (6 for v0.9 BlockStored, 8 at lora_name, 12 with
 *   extra_keys…kv_cache_spec_sliding_window). We read by position and guard every index.
 * - tagged maps (#42892 and later): `{type: "BlockStored", block_hashes: …}`; omit_defaults drops fields
 *   that equal their default, so every optional field may be missing. We read by name.
 * The batch itself is `[ts, events, data_parallel_rank?, …]` in released builds; some branches make it a map.
 * Unknown fields and unknown tags are skipped and counted, never fatal.
 */

/** Field order of BlockStored after the tag, oldest first; newer versions append. */
const STORED_FIELDS = [
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
const REMOVED_FIELDS = ['block_hashes', 'medium', 'group_idx'] as const;
const BATCH_FIELDS = ['ts', 'events', 'data_parallel_rank'] as const;

/** BlockStored needs at least block_hashes, parent, token_ids and block_size (v0.9 also had lora_id). */
const STORED_REQUIRED = 4;

/**
 * Ranges of the numbers on the wire. Every number is checked here, before any arithmetic, metric or write
 * uses it: a finite double can still overflow once scaled (ts = −1e306 s is −Infinity in ms), and one
 * uncaught non-finite value reaching prom-client ends the process (issue #36).
 * - ts is vLLM's time.time(): 1970 up to the year 5138 (1e11 s) leaves any real clock, and a simulated one
 *   starting at 0, well inside, and its milliseconds far inside a double's exact range.
 * - token ids are vocabulary indexes; every tokenizer's fit in 31 bits.
 * - a block holds a few to a few thousand tokens (mamba hybrids use attention blocks above 16); 2^20 keeps
 *   hashes × block_size exact, which the token-count check multiplies.
 * - a DP rank is added to the endpoint's port, so it is below 65,536; LoRA ids and KV cache group indexes are
 *   small counters: safe integers.
 */
export const MAX_TS_SEC = 1e11;
export const MAX_TOKEN_ID = 0x7fffffff;
export const MAX_BLOCK_SIZE = 2 ** 20;
export const MAX_DP_RANK = 65_535;

type Fields = Record<string, unknown>;

class Invalid extends Error {
  constructor(readonly reason: InvalidEventReason) {
    super(reason);
  }
}

const MEDIUM_TIERS: Record<string, Tier> = { GPU: 'GPU', CPU: 'CPU', STORAGE: 'STORAGE' };

function isMap(v: unknown): v is Fields {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Positional array (after the tag) or map → named fields; counts fields we do not know. */
function toFields(
  raw: unknown[] | Fields,
  names: readonly string[],
  offset: number,
  unknown: { n: number },
): Fields {
  if (Array.isArray(raw)) {
    const out: Fields = {};
    const n = Math.min(raw.length - offset, names.length);
    for (let i = 0; i < n; i++) out[names[i]!] = raw[i + offset];
    if (raw.length - offset > names.length) unknown.n += raw.length - offset - names.length;
    return out;
  }
  for (const k of Object.keys(raw)) if (k !== 'type' && !names.includes(k)) unknown.n++;
  return raw;
}

/** A hash (or parent) that is not one: a number of the wrong kind is out of range, anything else the wrong type. */
function hash(v: unknown): VllmBlockHash {
  const h = normaliseBlockHash(v);
  if (h !== null) return h;
  throw new Invalid(typeof v === 'number' || typeof v === 'bigint' ? 'out_of_range' : 'bad_field');
}

function hashes(v: unknown): VllmBlockHash[] {
  if (!Array.isArray(v)) throw new Invalid('bad_field');
  const out: VllmBlockHash[] = new Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = hash(v[i]);
  return out;
}

/**
 * A whole number in [min, max] (a double of integral value is one: msgspec writes ints as ints, but nothing
 * requires it). -0 comes back as 0. A 64-bit int (BigInt) is always out of these ranges.
 */
function intIn(v: unknown, min: number, max: number): number {
  if (typeof v === 'number') {
    if (Number.isInteger(v) && v >= min && v <= max) return v + 0;
    throw new Invalid('out_of_range');
  }
  if (typeof v === 'bigint') throw new Invalid('out_of_range');
  throw new Invalid('bad_field');
}

function optInt(v: unknown): number | null {
  if (v === null || v === undefined) return null;
  return intIn(v, 0, Number.MAX_SAFE_INTEGER);
}

function optString(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  throw new Invalid('bad_field');
}

/** medium null (old producers) means the GPU pool. */
function tier(v: unknown): Tier {
  const m = optString(v);
  if (m === null) return 'GPU';
  const t = MEDIUM_TIERS[m];
  if (t === undefined) throw new Invalid('unknown_medium');
  return t;
}

function tokenIds(v: unknown): number[] {
  if (!Array.isArray(v)) throw new Invalid('bad_field');
  for (let i = 0; i < v.length; i++) {
    const t: unknown = v[i];
    // The common case first: a token id msgpack decoded as a small int.
    if (typeof t === 'number' && t >= 1 && t <= MAX_TOKEN_ID && Number.isInteger(t)) continue;
    v[i] = intIn(t, 0, MAX_TOKEN_ID);
  }
  return v as number[];
}

/**
 * extra_keys: one `tuple | None` per block. vLLM's order is lora_name, multimodal keys, cache_salt,
 * prompt-embeds hash (docs/collector.md#wire-format). We take the LoRA name off the front; what remains is plain
 * strings (cache_salt) or something opaque to us.
 */
function extraKeys(v: unknown, nBlocks: number, loraName: string | null): (BlockExtraKeys | null)[] | null {
  if (v === null || v === undefined) return null;
  if (!Array.isArray(v)) throw new Invalid('bad_field');
  if (v.length !== nBlocks) throw new Invalid('extra_keys_length');
  return v.map((t): BlockExtraKeys | null => {
    if (t === null || t === undefined) return null;
    if (!Array.isArray(t)) throw new Invalid('bad_field');
    const start = loraName !== null && t[0] === loraName ? 1 : 0;
    const strings: string[] = [];
    let opaque = false;
    for (let i = start; i < t.length; i++) {
      const x: unknown = t[i];
      if (typeof x === 'string') strings.push(x);
      else opaque = true;
    }
    return strings.length === 0 && !opaque ? null : { strings, opaque };
  });
}

function parseStored(f: Fields): KvEvent {
  const blockHashes = hashes(f.block_hashes);
  const parentRaw = f.parent_block_hash;
  const parent: VllmBlockHash | null = isNoParent(parentRaw) ? null : hash(parentRaw);
  // A placeholder with block_size 0 (later offloading connectors) is out of range too: dropped.
  const blockSize = intIn(f.block_size, 1, MAX_BLOCK_SIZE);
  const loraId = optInt(f.lora_id);
  const loraName = optString(f.lora_name);
  return {
    kind: 'stored',
    hashes: blockHashes,
    parent,
    tokenIds: tokenIds(f.token_ids),
    blockSize,
    loraName,
    loraNameMissing: loraName === null && loraId !== null && loraId !== 0,
    tier: tier(f.medium),
    extraKeys: extraKeys(f.extra_keys, blockHashes.length, loraName),
    groupIdx: optInt(f.group_idx),
    specKind: optString(f.kv_cache_spec_kind),
  };
}

function parseRemoved(f: Fields): KvEvent {
  return {
    kind: 'removed',
    hashes: hashes(f.block_hashes),
    tier: tier(f.medium),
    groupIdx: optInt(f.group_idx),
  };
}

function parseEvent(raw: unknown, batch: KvEventBatch, unknown: { n: number }): KvEvent | null {
  let tag: unknown;
  let body: unknown[] | Fields;
  if (Array.isArray(raw)) {
    tag = raw[0];
    body = raw;
  } else if (isMap(raw)) {
    tag = raw.type;
    body = raw;
  } else throw new Invalid('not_tagged');
  if (typeof tag !== 'string') throw new Invalid('not_tagged');
  switch (tag) {
    case 'BlockStored': {
      if (Array.isArray(body) && body.length < 1 + STORED_REQUIRED) throw new Invalid('bad_field');
      return parseStored(toFields(body, STORED_FIELDS, 1, unknown));
    }
    case 'BlockRemoved': {
      if (Array.isArray(body) && body.length < 2) throw new Invalid('bad_field');
      return parseRemoved(toFields(body, REMOVED_FIELDS, 1, unknown));
    }
    case 'AllBlocksCleared':
      toFields(body, [], 1, unknown);
      return { kind: 'cleared' };
    default:
      batch.unknownEvents++;
      return null;
  }
}

/**
 * Decodes one KV-event payload (the third ZMQ frame). Never throws: a payload that is not msgpack, or not
 * a batch, is a failed result; a bad event inside a good batch is dropped and counted in `invalidEvents`.
 */
export function parseVllmBatch(raw: Uint8Array): ParseBatchResult {
  const dec = decodeMsgpack(raw);
  if (!dec.ok) return { ok: false, reason: dec.truncated ? 'truncated' : 'msgpack', detail: dec.detail };
  const v = dec.value;
  let fields: Fields;
  const unknown = { n: 0 };
  if (Array.isArray(v)) {
    if (v.length < 2)
      return { ok: false, reason: 'batch_shape', detail: `batch array of ${v.length} elements` };
    // A 4th element (publisher_id, open PRs) and beyond is not ours to interpret.
    fields = toFields(v, BATCH_FIELDS, 0, unknown);
  } else if (isMap(v)) fields = toFields(v, BATCH_FIELDS, 0, unknown);
  else return { ok: false, reason: 'batch_shape', detail: `batch is ${typeof v}` };

  const ts = fields.ts;
  const events = fields.events;
  const rank = fields.data_parallel_rank;
  if (typeof ts === 'bigint')
    return {
      ok: false,
      reason: 'out_of_range',
      detail: `ts ${ts} is a 64-bit integer, not a time in seconds`,
    };
  if (typeof ts !== 'number') return { ok: false, reason: 'batch_field', detail: 'ts is not a number' };
  // The collector uses ts * 1000 (ms): that must be a finite time in range too.
  if (!(ts >= 0 && ts <= MAX_TS_SEC && Number.isFinite(ts * 1000)))
    return { ok: false, reason: 'out_of_range', detail: `ts ${ts} is not a time in seconds since 1970` };
  if (!Array.isArray(events)) return { ok: false, reason: 'batch_field', detail: 'events is not an array' };
  if (rank !== null && rank !== undefined) {
    if (typeof rank !== 'number' && typeof rank !== 'bigint')
      return { ok: false, reason: 'batch_field', detail: 'data_parallel_rank is not an integer' };
    if (!(typeof rank === 'number' && Number.isInteger(rank) && rank >= 0 && rank <= MAX_DP_RANK))
      return { ok: false, reason: 'out_of_range', detail: `data_parallel_rank ${rank} is out of range` };
  }

  const batch: KvEventBatch = {
    tsSec: ts + 0,
    events: [],
    dataParallelRank: typeof rank === 'number' ? rank + 0 : null,
    unknownEvents: 0,
    unknownFields: 0,
    invalidEvents: {},
  };
  for (const raw of events) {
    try {
      const e = parseEvent(raw, batch, unknown);
      if (e !== null) batch.events.push(e);
    } catch (err) {
      if (!(err instanceof Invalid)) throw err;
      batch.invalidEvents[err.reason] = (batch.invalidEvents[err.reason] ?? 0) + 1;
    }
  }
  batch.unknownFields = unknown.n;
  return { ok: true, batch };
}
