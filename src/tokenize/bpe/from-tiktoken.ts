// Builds our JS BPE engine from a tiktoken encoding's rank files.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { ByteBpe } from './byte-bpe.js';
import { PACK } from './merge.js';
import { PairTable } from './pair-table.js';
import { toJsPattern } from './pattern.js';
import { SLICE_ITEMS, runAtOnce, runInSlices, type SlicedBuild } from './slices.js';

interface TiktokenRanksJson {
  pat_str: string;
  bpe_ranks: string;
}

/** Pair lookups remembered; cleared when full (a prompt uses a few thousand distinct pairs). */
const PAIR_MEMO_MAX = 1 << 16;
/** Marks a pair not looked up yet (packed merges and "no merge", -1, are never this). */
const UNKNOWN = -2;

/**
 * The JS engine for a tiktoken encoding, from the rank files the `tiktoken` package ships
 * (`tiktoken/encoders/<name>.json`: lines of `<name> <first rank> <base64 token>…`). A token's rank is its
 * id, and two adjacent parts merge when their concatenated bytes are a token, lowest rank first.
 */
export function byteBpeFromTiktoken(encoding: string): ByteBpe | { unsupported: string } {
  // Read, not require(): require would keep the multi-megabyte JSON in its module cache for the process.
  return runAtOnce(
    buildFromRanks(JSON.parse(readFileSync(ranksFile(encoding), 'utf8')) as TiktokenRanksJson),
  );
}

/**
 * byteBpeFromTiktoken without holding the event loop: the file is read asynchronously and the rank table
 * built in slices (JSON.parse of the 2.3 MB file stays one synchronous step).
 */
export async function byteBpeFromTiktokenAsync(encoding: string): Promise<ByteBpe | { unsupported: string }> {
  const text = await readFile(ranksFile(encoding), 'utf8');
  return runInSlices(buildFromRanks(JSON.parse(text) as TiktokenRanksJson));
}

function ranksFile(encoding: string): string {
  return createRequire(import.meta.url).resolve(`tiktoken/encoders/${encoding}.json`);
}

/** What the JS engine of a tiktoken encoding is made of: its regex and each token's bytes (latin1) → rank. */
export interface TiktokenTables {
  kind: 'tiktoken';
  pattern: RegExp;
  ranks: Map<string, number>;
}

function* buildFromRanks(json: TiktokenRanksJson): SlicedBuild<ByteBpe | { unsupported: string }> {
  const tables = yield* tiktokenTables(json);
  return 'unsupported' in tables ? tables : engineFromTiktokenTables(tables);
}

/** The rank file's tables (the costly part: base64 decoding every token), yielding between slices. */
export function* tiktokenTables(
  json: TiktokenRanksJson,
): SlicedBuild<TiktokenTables | { unsupported: string }> {
  const pattern = toJsPattern(json.pat_str);
  if (pattern === null) return { unsupported: `pre-tokenizer regex not portable: ${json.pat_str}` };
  const ranks = new Map<string, number>();
  for (const line of json.bpe_ranks.split('\n')) {
    const parts = line.split(' ');
    const first = Number(parts[1]);
    for (let i = 2; i < parts.length; i++) {
      ranks.set(Buffer.from(parts[i]!, 'base64').toString('latin1'), first + i - 2);
      if (i % SLICE_ITEMS === 0) yield;
    }
  }
  return { kind: 'tiktoken', pattern, ranks };
}

/** The tables of `tiktoken/encoders/<encoding>.json`, read and built at once (a worker thread does this). */
export function tiktokenTablesOf(encoding: string): TiktokenTables | { unsupported: string } {
  return runAtOnce(
    tiktokenTables(JSON.parse(readFileSync(ranksFile(encoding), 'utf8')) as TiktokenRanksJson),
  );
}

/** The engine over built tables: a token's rank is its id; a pair merges when its bytes are a token. */
export function engineFromTiktokenTables(t: TiktokenTables): ByteBpe | { unsupported: string } {
  const { pattern, ranks } = t;
  const bytesOf: string[] = [];
  for (const [bytes, id] of ranks) bytesOf[id] = bytes;
  const byteIds: number[] = [];
  for (let b = 0; b < 256; b++) {
    const id = ranks.get(String.fromCharCode(b));
    if (id === undefined) return { unsupported: `byte ${b} is not a token` };
    byteIds.push(id);
  }
  const memo = new PairTable(PAIR_MEMO_MAX);
  const lookup = (a: number, b: number): number => {
    let v = memo.get(a, b, UNKNOWN);
    if (v === UNKNOWN) {
      const r = ranks.get(bytesOf[a]! + bytesOf[b]!);
      v = r === undefined ? -1 : r * PACK + r;
      if (memo.full) memo.clear();
      memo.add(a, b, v);
    }
    return v;
  };
  return new ByteBpe({ pattern, keepGaps: false, normalize: null, byteIds, lookup });
}
