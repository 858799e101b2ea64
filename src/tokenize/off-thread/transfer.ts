// The JS engine's tables in a transferable form: typed arrays cross threads without a copy or a parse.
import { engineFromHfTables, type HfTables } from '../bpe/from-hf.js';
import { engineFromTiktokenTables, type TiktokenTables } from '../bpe/from-tiktoken.js';
import type { ByteBpe } from '../bpe/byte-bpe.js';
import { PairTable, type PairTableParts } from '../bpe/pair-table.js';
import { SLICE_ITEMS, type SlicedBuild } from '../bpe/slices.js';

/** A string → id map as one byte buffer: string i is bytes[ends[i-1], ends[i]) with id ids[i]. */
export interface PackedStrings {
  encoding: 'latin1' | 'utf8';
  bytes: Uint8Array;
  ends: Uint32Array;
  ids: Int32Array;
}

interface PackedPattern {
  source: string;
  flags: string;
}

export type PackedTables =
  | { kind: 'tiktoken'; pattern: PackedPattern; ranks: PackedStrings }
  | {
      kind: 'hf';
      pattern: PackedPattern;
      normalize: 'NFC' | null;
      byteIds: number[];
      pairs: PairTableParts;
      wholeWords: PackedStrings | null;
    };

function packStrings(map: Map<string, number>, encoding: PackedStrings['encoding']): PackedStrings {
  let total = 0;
  for (const k of map.keys()) total += Buffer.byteLength(k, encoding);
  // Own ArrayBuffers (never Buffer's shared pool): they are transferred.
  const bytes = new Uint8Array(total);
  const buf = Buffer.from(bytes.buffer);
  const ends = new Uint32Array(map.size);
  const ids = new Int32Array(map.size);
  let at = 0;
  let i = 0;
  for (const [k, id] of map) {
    at += buf.write(k, at, encoding);
    ends[i] = at;
    ids[i++] = id;
  }
  return { encoding, bytes, ends, ids };
}

function* unpackStrings(p: PackedStrings): SlicedBuild<Map<string, number>> {
  const buf = Buffer.from(p.bytes.buffer, p.bytes.byteOffset, p.bytes.byteLength);
  const map = new Map<string, number>();
  let start = 0;
  for (let i = 0; i < p.ends.length; i++) {
    const end = p.ends[i]!;
    map.set(buf.toString(p.encoding, start, end), p.ids[i]!);
    start = end;
    if (i % SLICE_ITEMS === SLICE_ITEMS - 1) yield;
  }
  return map;
}

function copyParts(p: PairTableParts): PairTableParts {
  return { left: p.left.slice(), right: p.right.slice(), value: p.value.slice(), size: p.size };
}

/** Tables built in the worker, packed to post (nothing in them is shared with `t`). */
export function packTables(t: TiktokenTables | HfTables): PackedTables {
  const pattern = { source: t.pattern.source, flags: t.pattern.flags };
  if (t.kind === 'tiktoken') return { kind: 'tiktoken', pattern, ranks: packStrings(t.ranks, 'latin1') };
  return {
    kind: 'hf',
    pattern,
    normalize: t.normalize,
    byteIds: t.byteIds,
    // Copies: the arrays are transferred, and the worker's own engine keeps using the originals.
    pairs: copyParts(t.pairs.parts()),
    wholeWords: t.wholeWords && packStrings(t.wholeWords, 'utf8'),
  };
}

/** The buffers to transfer with packed tables (the sender's copies become unusable). */
export function transferList(p: PackedTables): ArrayBuffer[] {
  const strings = (s: PackedStrings): ArrayBuffer[] =>
    [s.bytes.buffer, s.ends.buffer, s.ids.buffer] as ArrayBuffer[];
  if (p.kind === 'tiktoken') return strings(p.ranks);
  return [
    p.pairs.left.buffer,
    p.pairs.right.buffer,
    p.pairs.value.buffer,
    ...(p.wholeWords ? strings(p.wholeWords) : []),
  ] as ArrayBuffer[];
}

/** The engine from packed tables, rebuilding its maps in slices (the event loop turns between them). */
export function* engineFromPacked(p: PackedTables): SlicedBuild<ByteBpe | { unsupported: string }> {
  const pattern = new RegExp(p.pattern.source, p.pattern.flags);
  if (p.kind === 'tiktoken')
    return engineFromTiktokenTables({ kind: 'tiktoken', pattern, ranks: yield* unpackStrings(p.ranks) });
  return engineFromHfTables({
    kind: 'hf',
    pattern,
    normalize: p.normalize,
    byteIds: p.byteIds,
    pairs: PairTable.fromParts(p.pairs),
    wholeWords: p.wholeWords && (yield* unpackStrings(p.wholeWords)),
  });
}
