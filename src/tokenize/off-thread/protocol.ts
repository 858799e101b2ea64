// The messages between the plugin's thread and the tokenizer worker (structured clone; tables transferred).
import type { SpecialTokenFlags } from '../types.js';
import type { PackedTables } from './transfer.js';

/** Where a tokenizer comes from, resolved on the caller's thread (a bad spec or missing file throws there). */
export type TokenizerSource = { kind: 'tiktoken'; encoding: string } | { kind: 'hf'; path: string };

export type WorkerRequest =
  | { id: number; op: 'load'; spec: string; source: TokenizerSource }
  | { id: number; op: 'encodeOrdinary'; spec: string; text: string; atStart: boolean }
  | { id: number; op: 'encode'; spec: string; text: string }
  | { id: number; op: 'decode'; spec: string; ids: number[] };

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
  | { id: number; ok: true; value: LoadedInfo | number[] | string }
  | { id: number; ok: false; error: WorkerError };
