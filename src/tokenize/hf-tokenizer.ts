// The `hf:` tokenizer: HF's native tokenizers library, with our JS BPE for plain text when it matches.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Tokenizer as NativeTokenizer } from 'tokenizers';
import { KinferenceError } from '../core/errors.js';
import type { ByteBpe } from './bpe/byte-bpe.js';
import { byteBpeFromHfJson, byteBpeFromHfJsonSliced } from './bpe/from-hf.js';
import { runInSlices } from './bpe/slices.js';
import { checkedEngine, ENGINE_PROBE, nativeEngineNote } from './bpe/probe.js';
import type { SpecialTokenFlags, Tokenizer } from './types.js';
import { isRecord } from '../core/is-record.js';

/** The parts of a tokenizer.json we read ourselves (the native library does the tokenizing). */
interface AddedTokenJson {
  id: number;
  content: string;
  special?: boolean;
  lstrip?: boolean;
  rstrip?: boolean;
  single_word?: boolean;
  normalized?: boolean;
}

/**
 * True when a pre-tokenizer treats the start of the input differently from text after a special token:
 * HF Metaspace with prepend_scheme "first" prepends "▁" only to the piece at original offset 0.
 */
export function isStartSensitive(preTokenizer: unknown): boolean {
  if (!isRecord(preTokenizer)) return false;
  if (preTokenizer.type === 'Metaspace' && preTokenizer.prepend_scheme === 'first') return true;
  const children = preTokenizer.pretokenizers;
  return Array.isArray(children) && children.some((c) => isStartSensitive(c));
}

/** Pre-tokens longer than this send their segment to the native library, off the event loop. */
export const LONG_PIECE_CHARS = 1024;

class HfTokenizer implements Tokenizer {
  readonly spec: string;
  readonly specialTokens: ReadonlyMap<string, number>;
  readonly specialTokenFlags: ReadonlyMap<string, SpecialTokenFlags>;
  readonly #native: NativeTokenizer;
  /** An added token that matches only itself, prepended so a piece is encoded as if it followed a special. */
  readonly #anchor: { text: string; id: number } | null;
  /** The JS engine for plain text once it has matched the native library on the probe, else null. */
  #fast: ByteBpe | null = null;
  /** Settles when the JS engine is checked (immediately when there is none). */
  readonly #checked: Promise<void>;
  #engineNote: string;
  #maxCharsPerToken: number | null = null;

  constructor(
    spec: string,
    native: NativeTokenizer,
    added: AddedTokenJson[],
    startSensitive: boolean,
    fast: ByteBpe | { unsupported: string },
  ) {
    this.spec = spec;
    this.#native = native;
    const specials = new Map<string, number>();
    const flags = new Map<string, SpecialTokenFlags>();
    for (const t of added) {
      specials.set(t.content, t.id);
      const f = { lstrip: t.lstrip === true, rstrip: t.rstrip === true, singleWord: t.single_word === true };
      if (f.lstrip || f.rstrip || f.singleWord) flags.set(t.content, f);
    }
    this.specialTokens = specials;
    this.specialTokenFlags = flags;
    const plain = added.find((t) => !t.lstrip && !t.rstrip && !t.single_word && t.normalized !== true);
    this.#anchor = startSensitive && plain ? { text: plain.content, id: plain.id } : null;
    if ('unsupported' in fast || this.#anchor !== null) {
      this.#engineNote = nativeEngineNote(
        'unsupported' in fast ? fast.unsupported : 'start-sensitive pre-tokenizer',
      );
      this.#checked = Promise.resolve();
    } else {
      this.#engineNote = nativeEngineNote('JS engine being checked');
      this.#checked = this.#ids(ENGINE_PROBE).then(
        (ids) => {
          const checked = checkedEngine(spec, fast, ids);
          this.#fast = checked.engine;
          this.#engineNote = checked.note;
        },
        (e: unknown) => {
          this.#engineNote = nativeEngineNote(`the probe check failed: ${String(e)}`);
        },
      );
    }
  }

  get engine(): string {
    return this.#engineNote;
  }

  /**
   * The longest entry of get_vocab() (vocabulary and added tokens), in code points (Python's len()). Read on
   * first use: only the emulator asks, and the walk over the vocabulary takes 35–100 ms.
   */
  get maxCharsPerToken(): number {
    if (this.#maxCharsPerToken === null) {
      let max = 0;
      for (const t of Object.keys(this.#native.getVocab(true)))
        // UTF-16 length bounds the code-point count: count exactly only what could beat the maximum.
        if (t.length > max) max = Math.max(max, [...t].length);
      this.#maxCharsPerToken = max;
    }
    return this.#maxCharsPerToken;
  }

  async #ids(text: string): Promise<number[]> {
    const enc = await this.#native.encode(text, null, { addSpecialTokens: false });
    return enc.getIds();
  }

  async encodeOrdinary(text: string, atStart = false): Promise<number[]> {
    if (text.length === 0) return [];
    await this.#checked;
    const fast = this.#fast?.tryEncode(text, LONG_PIECE_CHARS);
    if (fast) return fast;
    if (this.#anchor === null || atStart) return this.#ids(text);
    const ids = await this.#ids(this.#anchor.text + text);
    if (ids[0] !== this.#anchor.id)
      throw new KinferenceError('KINF_ERR_INTERNAL', `${this.spec}: anchor token did not encode to itself`);
    return ids.slice(1);
  }

  encode(text: string): Promise<number[]> {
    return this.#ids(text);
  }

  decode(ids: readonly number[]): Promise<string> {
    return this.#native.decode([...ids], false);
  }
}

/**
 * Builds `hf:<path to tokenizer.json>`: the native (Rust) HF tokenizers library, with plain text encoded by
 * our JS byte-level BPE when the pipeline allows it and the engine matches the native library on a probe.
 * `engine` replaces the JS engine (tests use it to check the fallback).
 */
export function createHfTokenizer(
  spec: string,
  path: string,
  engine?: ByteBpe | { unsupported: string },
): Tokenizer {
  const file = readHfTokenizerJson(spec, path);
  return hfTokenizerFrom(spec, path, file, engine ?? byteBpeFromHfJson(file.json));
}

/** A tokenizer.json read and parsed; throws KINF_ERR_TOKENIZER_SPEC when it cannot be read or is not one. */
export function readHfTokenizerJson(
  spec: string,
  path: string,
): { text: string; json: Record<string, unknown> } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw unreadable(spec, path, e);
  }
  return { text, json: parseTokenizerJson(spec, path, text) };
}

/** The tokenizer over a read tokenizer.json and a JS engine built from it (the tokenizer worker builds both). */
export function hfTokenizerFrom(
  spec: string,
  path: string,
  file: { text: string; json: Record<string, unknown> },
  engine: ByteBpe | { unsupported: string },
): Tokenizer {
  return new HfTokenizer(
    spec,
    nativeFrom(spec, path, file.text),
    addedTokens(file.json),
    isStartSensitive(file.json.pre_tokenizer),
    engine,
  );
}

/**
 * createHfTokenizer without holding the event loop where the libraries allow it: the file is read
 * asynchronously and the JS engine's tables built in slices, with a turn of the event loop between steps.
 * JSON.parse and the native library's Tokenizer.fromString (it has no asynchronous form) stay synchronous.
 */
export async function createHfTokenizerAsync(spec: string, path: string): Promise<Tokenizer> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw unreadable(spec, path, e);
  }
  await nextTurn();
  const json = parseTokenizerJson(spec, path, text);
  await nextTurn();
  const native = nativeFrom(spec, path, text);
  await nextTurn();
  const engine = await runInSlices(byteBpeFromHfJsonSliced(json));
  return new HfTokenizer(spec, native, addedTokens(json), isStartSensitive(json.pre_tokenizer), engine);
}

function unreadable(spec: string, path: string, e: unknown): KinferenceError {
  return new KinferenceError(
    'KINF_ERR_TOKENIZER_SPEC',
    `${spec}: cannot read ${path}: ${(e as Error).message}`,
    {
      cause: e,
    },
  );
}

function parseTokenizerJson(spec: string, path: string, text: string): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_TOKENIZER_SPEC',
      `${spec}: ${path} is not JSON: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  if (!isRecord(json) || !isRecord(json.model))
    throw new KinferenceError(
      'KINF_ERR_TOKENIZER_SPEC',
      `${spec}: ${path} is not a HF tokenizer.json (no "model")`,
    );
  return json;
}

function nativeFrom(spec: string, path: string, text: string): NativeTokenizer {
  try {
    return NativeTokenizer.fromString(text);
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_TOKENIZER_SPEC',
      `${spec}: tokenizers cannot load ${path}: ${String(e)}`,
      {
        cause: e,
      },
    );
  }
}

function addedTokens(json: Record<string, unknown>): AddedTokenJson[] {
  return (Array.isArray(json.added_tokens) ? json.added_tokens : []).filter(
    (t): t is AddedTokenJson => isRecord(t) && typeof t.id === 'number' && typeof t.content === 'string',
  );
}
