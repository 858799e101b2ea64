// loadChatTemplate: a chat template spec (chatml, harmony, llama3, none, hf:) → a compiled template, cached.
import { KinferenceError } from '../core/errors.js';
import { restorePythonNumbers } from '../core/python-json.js';
import { createChatmlTemplate } from './chat-template/chatml.js';
import { createHarmonyTemplate } from './chat-template/harmony.js';
import { createHfTemplate } from './chat-template/hf-jinja.js';
import { createLlama3Template } from './chat-template/llama3.js';
import { createNoneTemplate } from './chat-template/none.js';
import { resolveHfFile } from './hf-source.js';
import type { ChatTemplate } from './types.js';

/** One compiled template per spec for the life of the process. */
const templates = new Map<string, ChatTemplate>();

/**
 * `chatml` | `harmony` | `llama3` | `none` | `hf:<tokenizer_config.json or .jinja, model directory or Hugging
 * Face model id>` (a relative path is resolved against the working directory, a model id in the Hugging Face
 * cache: hf-source.ts). Throws KINF_ERR_TEMPLATE_SPEC for a bad spec, file or template.
 * `defaultKwargs`: what vLLM was started with as --default-chat-template-kwargs (hf: templates only).
 */
export function loadChatTemplate(spec: string, defaultKwargs?: Record<string, unknown>): ChatTemplate {
  const key = defaultKwargs === undefined ? spec : `${spec}\u0000${JSON.stringify(defaultKwargs)}`;
  const cached = templates.get(key);
  if (cached) return cached;
  let t: ChatTemplate;
  if (spec === 'chatml') t = createChatmlTemplate();
  else if (spec === 'harmony') t = createHarmonyTemplate();
  else if (spec === 'llama3') t = createLlama3Template();
  else if (spec === 'none') t = createNoneTemplate();
  else if (spec.startsWith('hf:') && spec.length > 3)
    t = createHfTemplate(
      spec,
      resolveHfFile(spec, spec.slice(3), 'tokenizer_config.json', 'KINF_ERR_TEMPLATE_SPEC'),
      undefined,
      defaultKwargs,
    );
  else
    throw new KinferenceError(
      'KINF_ERR_TEMPLATE_SPEC',
      `chat template "${spec}": expected chatml, harmony, llama3, none or hf:<path to tokenizer_config.json or Hugging Face model id>`,
    );
  // Numbers the request carried in Python's text (core/python-json.ts) get that text back, whoever printed them.
  const raw = t;
  t = {
    spec: raw.spec,
    render: (req) => restorePythonNumbers(raw.render(req)),
    ...(raw.pure === true ? { pure: true } : {}),
  };
  templates.set(key, t);
  return t;
}
