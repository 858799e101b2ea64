// The worker thread: loads tokenizers, serves encode/decode; as a decision worker, prepares requests.
import { getHeapStatistics } from 'node:v8';
import { parentPort } from 'node:worker_threads';
import { KinferenceError } from '../../core/errors.js';
import { engineFromHfTables, hfTables } from '../bpe/from-hf.js';
import { engineFromTiktokenTables, tiktokenTablesOf } from '../bpe/from-tiktoken.js';
import { runAtOnce } from '../bpe/slices.js';
import { hfTokenizerFrom, LONG_PIECE_CHARS, readHfTokenizerJson } from '../hf-tokenizer.js';
import { createTiktokenTokenizer, isTiktokenEncoding } from '../tiktoken-tokenizer.js';
import type { Tokenizer } from '../types.js';
import { prepare, segmentStats, warm } from './prepare.js';
import type { LoadedInfo, TokenizerSource, WorkerRequest, WorkerResponse } from './protocol.js';
import { packTables, transferList, type PackedTables } from './transfer.js';

/**
 * Everything that holds a thread for long happens here, not on the plugin server's event loop: JSON.parse of
 * the file, the JS engine's tables, tiktoken's WASM constructor or tokenizers' fromString, and the probe
 * check. The caller gets the tables (transferred) and the facts it serves requests with; the native encoder
 * stays here and answers what the JS engine cannot (encode, decode, long pieces, a failed probe).
 */
const tokenizers = new Map<string, Tokenizer>();

async function load(spec: string, source: TokenizerSource): Promise<LoadedInfo> {
  let tok: Tokenizer;
  let packed: PackedTables | null = null;
  let maxPieceChars = Infinity;
  if (source.kind === 'tiktoken') {
    if (!isTiktokenEncoding(source.encoding))
      throw new KinferenceError('KINF_ERR_TOKENIZER_SPEC', `${spec}: unknown encoding ${source.encoding}`);
    const tables = tiktokenTablesOf(source.encoding === 'o200k_harmony' ? 'o200k_base' : source.encoding);
    const engine = 'unsupported' in tables ? tables : engineFromTiktokenTables(tables);
    tok = createTiktokenTokenizer(spec, source.encoding, engine);
    if (!('unsupported' in tables)) packed = packTables(tables);
  } else {
    const file = readHfTokenizerJson(spec, source.path);
    const tables = runAtOnce(hfTables(file.json));
    tok = hfTokenizerFrom(
      spec,
      source.path,
      file,
      'unsupported' in tables ? tables : engineFromHfTables(tables),
    );
    // The probe check runs on the first encode; wait for it so `engine` is final.
    await tok.encodeOrdinary('probe');
    if (!('unsupported' in tables)) packed = packTables(tables);
    maxPieceChars = LONG_PIECE_CHARS;
  }
  tokenizers.set(spec, tok);
  return {
    engine: tok.engine,
    specials: [...tok.specialTokens],
    flags: [...(tok.specialTokenFlags ?? [])],
    maxCharsPerToken: tok.maxCharsPerToken ?? 0,
    maxPieceChars,
    // The JS engine is worth sending only when it passed the probe check.
    tables: tok.engine === 'js-bpe' ? packed : null,
  };
}

function loaded(spec: string): Tokenizer {
  const tok = tokenizers.get(spec);
  if (!tok) throw new Error(`tokenizer worker: ${spec} is not loaded`);
  return tok;
}

async function serve(req: WorkerRequest): Promise<Extract<WorkerResponse, { ok: true }>['value']> {
  switch (req.op) {
    case 'warm':
      await warm(req.settings);
      return null;
    case 'prepare':
      return prepare(req.settings, req.body);
    case 'stats':
      return segmentStats();
    case 'heap': {
      // Each worker is its own V8 isolate: the plugin server's process.memoryUsage() does not see this heap.
      (globalThis as { gc?: () => void }).gc?.();
      return getHeapStatistics().used_heap_size;
    }
    case 'load':
      return load(req.spec, req.source);
    case 'encodeOrdinary':
      return loaded(req.spec).encodeOrdinary(req.text, req.atStart);
    case 'encode':
      return loaded(req.spec).encode(req.text);
    case 'decode':
      return loaded(req.spec).decode(req.ids);
  }
}

const port = parentPort;
if (port)
  port.on('message', (req: WorkerRequest) => {
    serve(req).then(
      (value) => {
        const msg: WorkerResponse = { id: req.id, ok: true, value };
        const tables = req.op === 'load' ? (value as LoadedInfo).tables : null;
        port.postMessage(msg, tables ? transferList(tables) : []);
      },
      (e: unknown) => {
        const msg: WorkerResponse = {
          id: req.id,
          ok: false,
          error: {
            message: e instanceof Error ? e.message : String(e),
            ...(e instanceof KinferenceError ? { code: e.code } : {}),
          },
        };
        port.postMessage(msg);
      },
    );
  });
