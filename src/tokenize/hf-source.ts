// Where the file of an `hf:` tokenizer or template spec is: a path, a model directory, or a cached model id.
// A Hugging Face model id is found in the local Hugging Face cache (what vLLM users write: `hf:Qwen/Qwen3-8B`).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { KinferenceError } from '../core/errors.js';

/**
 * `org/name` or `name`, optionally `@revision` (a branch, tag or commit), as huggingface_hub accepts them; a
 * value ending in .json or .jinja, or starting with / . or ~, is a path.
 */
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9][A-Za-z0-9._-]*)?(@[A-Za-z0-9._/-]+)?$/;

/** True when the text after `hf:` reads as a Hugging Face model id rather than a file path. */
export function isHfModelId(ref: string): boolean {
  return MODEL_ID.test(ref) && !/\.(json|jinja)(@|$)/.test(ref);
}

/** The hub cache directory, as huggingface_hub picks it (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, ~/.cache). */
export function hfCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const hub = env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE;
  if (hub) return hub;
  const home = env.HF_HOME || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'huggingface');
  return join(home, 'hub');
}

/** The file `file` of a cached model: models--org--name/snapshots/<rev>/<file>, rev from refs/<branch>. */
function fromCache(modelId: string, file: string, dir: string): string | { searched: string } {
  const at = modelId.indexOf('@');
  const repo = at < 0 ? modelId : modelId.slice(0, at);
  const revision = at < 0 ? 'main' : modelId.slice(at + 1);
  const root = join(dir, `models--${repo.replace(/\//g, '--')}`);
  // A revision is a branch or tag (a refs/ file holding the commit) or the commit itself.
  const ref = join(root, 'refs', revision);
  const commit = existsSync(ref) ? readFileSync(ref, 'utf8').trim() : revision;
  const path = join(root, 'snapshots', commit, file);
  return existsSync(path) ? path : { searched: path };
}

/**
 * The file an `hf:` spec names. `ref` is the text after `hf:`; `file` the model file it stands for when it
 * names a directory or a model (tokenizer.json or tokenizer_config.json). In order: an existing path (a model
 * directory gives its `file`), then a model id in the Hugging Face cache. A model id absent from the cache
 * throws `code` naming the directories searched and the command that fetches the files; anything else is
 * returned as a path (resolved against the working directory), whose reader reports a missing file.
 */
export function resolveHfFile(
  spec: string,
  ref: string,
  file: 'tokenizer.json' | 'tokenizer_config.json',
  code: 'KINF_ERR_TOKENIZER_SPEC' | 'KINF_ERR_TEMPLATE_SPEC',
  env: NodeJS.ProcessEnv = process.env,
): string {
  const path = resolve(ref);
  if (existsSync(path)) return statSync(path).isDirectory() ? join(path, file) : path;
  if (!isHfModelId(ref)) return path;
  const found = fromCache(ref, file, hfCacheDir(env));
  if (typeof found === 'string') return found;
  const repo = ref.split('@')[0]!;
  const revision = ref.includes('@') ? ` --revision ${ref.slice(ref.indexOf('@') + 1)}` : '';
  throw new KinferenceError(
    code,
    `${spec}: model ${ref} is not in the Hugging Face cache (no ${found.searched}, ` +
      `and no file or directory ${path}; the cache is $HF_HUB_CACHE, else $HF_HOME/hub, else ` +
      `~/.cache/huggingface/hub). Fetch its tokenizer ` +
      `files with \`huggingface-cli download ${repo} tokenizer.json tokenizer_config.json${revision}\`, ` +
      `or give the path of the file`,
  );
}
