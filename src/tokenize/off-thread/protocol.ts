// The messages between the plugin's thread and its workers (structured clone; tables and bodies transferred).
import type { FallbackReason } from '../../core/fallback.js';
import type { SegmentCacheStats } from '../segment-cache.js';
import type { SpecialTokenFlags } from '../types.js';
import type { PackedTables } from './transfer.js';

/** Where a tokenizer comes from, resolved on the caller's thread (a bad spec or missing file throws there). */
export type TokenizerSource = { kind: 'tiktoken'; encoding: string } | { kind: 'hf'; path: string };

export type WorkerRequest =
  | { id: number; op: 'load'; spec: string; source: TokenizerSource }
  | { id: number; op: 'encodeOrdinary'; spec: string; text: string; atStart: boolean }
  | { id: number; op: 'encode'; spec: string; text: string }
  | { id: number; op: 'decode'; spec: string; ids: number[] }
  | { id: number; op: 'warm'; settings: PrepareSettings }
  | { id: number; op: 'prepare'; settings: PrepareSettings; body: Uint8Array | string }
  | { id: number; op: 'stats' }
  /** The worker's own V8 heap in use, bytes (after a GC when the process runs with --expose-gc). */
  | { id: number; op: 'heap' };

/** What a decision worker needs of a plugin config to prepare its requests (router/decision-pool.ts). */
export interface PrepareSettings {
  tokenizer: string;
  template: string;
  templateKwargs: Record<string, unknown> | null;
  maxBodyBytes: number;
  loraAdapters: Record<string, string> | null;
  maxMessages: number;
  maxDepth: number;
  maxPromptTokens: number;
  maxModelLen: Record<string, number> | null;
  blockSize: number;
  budgetMs: number;
  /** The worker's segment cache budget for this tokenizer. */
  segmentCacheBytes: number;
}

/** A prepare step's times in the worker, ms (the router's RouteTimings fields of the same names). */
export interface PrepareTimings {
  parseMs: number;
  templateMs: number;
  tokenizeMs: number;
  keysMs: number;
}

interface PreparedCommon {
  model: string | null;
  lora: string | null;
  maxTokens: number | null;
  user: string | null;
  promptTokens: number;
  truncated: boolean;
  promptChars: { cached: number; tokenized: number };
  timings: PrepareTimings;
}

/** A body prepared in a worker: its block keys and facts, or why it is routed on load alone. */
export type PrepareResult =
  | (PreparedCommon & {
      ok: true;
      model: string;
      keys: string[];
      hasVllmXargs: boolean;
      /** Decided by the body alone (its template reads no clock): the same body again may reuse it. */
      repeatable?: boolean;
    })
  | (PreparedCommon & { ok: false; reason: FallbackReason; detail: string });

/** What the caller's thread needs to serve the tokenizer: everything but the native encoder. */
export interface LoadedInfo {
  /** The tokenizer's `engine` note: "js-bpe" when the JS engine matched the native one on the probe. */
  engine: string;
  specials: [string, number][];
  flags: [string, SpecialTokenFlags][];
  maxCharsPerToken: number;
  /** Pre-tokens longer than this go to the worker's native encoder (Infinity: never). */
  maxPieceChars: number;
  /** The JS engine's tables when it passed the probe check, else null (the worker encodes everything). */
  tables: PackedTables | null;
}

export interface WorkerError {
  message: string;
  /** A KinferenceError's code, so the caller's thread throws the same error. */
  code?: string;
}

export type WorkerResponse =
  | {
      id: number;
      ok: true;
      value: LoadedInfo | number[] | string | PrepareResult | SegmentCacheStats[] | number | null;
    }
  | { id: number; ok: false; error: WorkerError };
