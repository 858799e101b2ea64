// loadTokenizer: a tokenizer spec (tiktoken:, hf:) → a tokenizer, one per spec for the process.
import { KinferenceError } from '../core/errors.js';
import { loadTokenizerOffThread } from './off-thread/index.js';
import { createHfTokenizer, createHfTokenizerAsync } from './hf-tokenizer.js';
import { resolveHfFile } from './hf-source.js';
import {
  createTiktokenTokenizer,
  createTiktokenTokenizerAsync,
  isTiktokenEncoding,
  TIKTOKEN_ENCODINGS,
  type TiktokenEncodingName,
} from './tiktoken-tokenizer.js';
import type { Tokenizer } from './types.js';

/** One tokenizer per spec for the life of the process: loading o200k or a tokenizer.json costs ~0.5 s. */
const tokenizers = new Map<string, Tokenizer>();

/**
 * `tiktoken:<o200k_base|o200k_harmony|cl100k_base>` or `hf:<path to tokenizer.json, model directory or Hugging
 * Face model id>` (a relative path is resolved against the working directory, a model id in the Hugging Face
 * cache: hf-source.ts). Throws KINF_ERR_TOKENIZER_SPEC for a bad spec or file.
 */
export function loadTokenizer(spec: string): Tokenizer {
  const cached = tokenizers.get(spec);
  if (cached) return cached;
  const source = sourceOf(spec);
  const tok =
    source.kind === 'tiktoken'
      ? createTiktokenTokenizer(spec, source.encoding)
      : createHfTokenizer(spec, source.path);
  tokenizers.set(spec, tok);
  return tok;
}

/** Loads in flight, so two callers of loadTokenizerAsync share one load. */
const loading = new Map<string, Promise<Tokenizer>>();

/**
 * loadTokenizer without holding the event loop: the file is read and parsed, the native encoder built and the
 * JS engine checked in a worker thread (off-thread/), and only the JS engine's maps are rebuilt here, in
 * slices. Should the worker itself fail (not the file: its KinferenceError is the load's), the load runs on
 * this thread as before, giving the event loop back between its steps. A bad spec or a missing file throws at
 * once, before any await.
 */
export function loadTokenizerAsync(spec: string): Promise<Tokenizer> {
  const cached = tokenizers.get(spec);
  if (cached) return Promise.resolve(cached);
  const running = loading.get(spec);
  if (running) return running;
  const source = sourceOf(spec);
  const inThread = (): Promise<Tokenizer> =>
    source.kind === 'tiktoken'
      ? createTiktokenTokenizerAsync(spec, source.encoding)
      : createHfTokenizerAsync(spec, source.path);
  const load = loadTokenizerOffThread(spec, source)
    .catch((e: unknown) => {
      if (e instanceof KinferenceError) throw e;
      return inThread();
    })
    .then(
      (tok) => {
        loading.delete(spec);
        const won = tokenizers.get(spec) ?? tok; // a blocking load may have finished first
        tokenizers.set(spec, won);
        return won;
      },
      (e: unknown) => {
        loading.delete(spec);
        throw e;
      },
    );
  loading.set(spec, load);
  return load;
}

type TokenizerSource = { kind: 'tiktoken'; encoding: TiktokenEncodingName } | { kind: 'hf'; path: string };

/** Where a spec's tokenizer comes from; throws KINF_ERR_TOKENIZER_SPEC for a bad spec or a missing file. */
function sourceOf(spec: string): TokenizerSource {
  if (spec.startsWith('tiktoken:')) {
    const name = spec.slice('tiktoken:'.length);
    if (!isTiktokenEncoding(name))
      throw new KinferenceError(
        'KINF_ERR_TOKENIZER_SPEC',
        `tokenizer "${spec}": unknown tiktoken encoding "${name}" (known: ${TIKTOKEN_ENCODINGS.join(', ')})`,
      );
    return { kind: 'tiktoken', encoding: name };
  }
  if (spec.startsWith('hf:') && spec.length > 3)
    return {
      kind: 'hf',
      path: resolveHfFile(spec, spec.slice(3), 'tokenizer.json', 'KINF_ERR_TOKENIZER_SPEC'),
    };
  throw new KinferenceError(
    'KINF_ERR_TOKENIZER_SPEC',
    `tokenizer "${spec}": expected tiktoken:<encoding> or hf:<path to tokenizer.json or Hugging Face model id>`,
  );
}
