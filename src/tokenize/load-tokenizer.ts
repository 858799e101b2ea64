// loadTokenizer: a tokenizer spec (tiktoken:, hf:) → a tokenizer, one per spec for the process.
import { KinferenceError } from '../core/errors.js';
import { createHfTokenizer } from './hf-tokenizer.js';
import { resolveHfFile } from './hf-source.js';
import { createTiktokenTokenizer, isTiktokenEncoding, TIKTOKEN_ENCODINGS } from './tiktoken-tokenizer.js';
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
  let tok: Tokenizer;
  if (spec.startsWith('tiktoken:')) {
    const name = spec.slice('tiktoken:'.length);
    if (!isTiktokenEncoding(name))
      throw new KinferenceError(
        'KINF_ERR_TOKENIZER_SPEC',
        `tokenizer "${spec}": unknown tiktoken encoding "${name}" (known: ${TIKTOKEN_ENCODINGS.join(', ')})`,
      );
    tok = createTiktokenTokenizer(spec, name);
  } else if (spec.startsWith('hf:') && spec.length > 3) {
    tok = createHfTokenizer(
      spec,
      resolveHfFile(spec, spec.slice(3), 'tokenizer.json', 'KINF_ERR_TOKENIZER_SPEC'),
    );
  } else {
    throw new KinferenceError(
      'KINF_ERR_TOKENIZER_SPEC',
      `tokenizer "${spec}": expected tiktoken:<encoding> or hf:<path to tokenizer.json or Hugging Face model id>`,
    );
  }
  tokenizers.set(spec, tok);
  return tok;
}
