// `hf:<Hugging Face model id>` resolved through a real (temporary) Hugging Face cache layout, for the plugin's
// loaders and the fleet file alike (issue #34).
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseFleetConfig } from '../../../src/config/fleet-config.js';
import { isKinferenceError } from '../../../src/core/errors.js';
import { loadChatTemplate } from '../../../src/tokenize/load-chat-template.js';
import { loadTokenizer } from '../../../src/tokenize/load-tokenizer.js';
import { QWEN3_DIR } from '../../helpers/qwen3.js';

const FIXTURE_TOKENIZER = 'spec/fixtures/tokenizers/metaspace-first.tokenizer.json';
const FIXTURE_CONFIG = join(QWEN3_DIR, 'tokenizer_config.json');

function errorOf(f: () => unknown): { code: string; message: string } {
  try {
    f();
  } catch (e) {
    if (isKinferenceError(e)) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('expected an error');
}

/** A snapshot of `repo` at `commit` in the cache layout huggingface_hub writes, with the fixture files. */
function snapshot(cache: string, repo: string, commit: string, refs: string[]): string {
  const root = join(cache, `models--${repo.replace('/', '--')}`);
  const dir = join(root, 'snapshots', commit);
  mkdirSync(dir, { recursive: true });
  copyFileSync(FIXTURE_TOKENIZER, join(dir, 'tokenizer.json'));
  copyFileSync(FIXTURE_CONFIG, join(dir, 'tokenizer_config.json'));
  mkdirSync(join(root, 'refs'), { recursive: true });
  for (const ref of refs) writeFileSync(join(root, 'refs', ref), `${commit}\n`);
  return dir;
}

describe('hf:<model id> from the Hugging Face cache', () => {
  const saved = { ...process.env };
  let home: string;
  let main: string;
  beforeAll(() => {
    home = mkdtempSync(join(tmpdir(), 'kinf-hf-'));
    main = snapshot(join(home, 'hub'), 'Kinf/Tiny-1B', 'a1b2c3', ['main']);
    snapshot(join(home, 'hub'), 'Kinf/Tiny-1B', 'd4e5f6', ['v2']);
  });
  afterEach(() => {
    for (const k of ['HF_HOME', 'HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'XDG_CACHE_HOME'])
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('loads the tokenizer and the template of refs/main under $HF_HOME/hub', async () => {
    process.env.HF_HOME = home;
    delete process.env.HF_HUB_CACHE;
    const tok = loadTokenizer('hf:Kinf/Tiny-1B');
    const byPath = loadTokenizer(`hf:${join(main, 'tokenizer.json')}`);
    expect(tok.spec).toBe('hf:Kinf/Tiny-1B');
    expect(await tok.encode('hello world')).toEqual(await byPath.encode('hello world'));
    const tpl = loadChatTemplate('hf:Kinf/Tiny-1B');
    expect(
      tpl.render({
        model: 'm',
        messages: [{ role: 'user', content: 'hi' }],
        addGenerationPrompt: true,
        continueFinalMessage: false,
        stream: false,
      }),
    ).toContain('<|im_start|>user\nhi');
  });

  it('takes a revision after @ (a branch, tag or commit) and honours $HF_HUB_CACHE first', async () => {
    process.env.HF_HOME = '/nonexistent';
    process.env.HF_HUB_CACHE = join(home, 'hub');
    expect(loadTokenizer('hf:Kinf/Tiny-1B@v2').spec).toBe('hf:Kinf/Tiny-1B@v2');
    expect(loadTokenizer('hf:Kinf/Tiny-1B@d4e5f6').spec).toBe('hf:Kinf/Tiny-1B@d4e5f6');
    expect(loadChatTemplate('hf:Kinf/Tiny-1B@v2').spec).toBe('hf:Kinf/Tiny-1B@v2');
  });

  it('a model directory stands for its tokenizer.json and tokenizer_config.json', () => {
    expect(loadTokenizer(`hf:${main}`).spec).toBe(`hf:${main}`);
    expect(loadChatTemplate(`hf:${main}`).spec).toBe(`hf:${main}`);
  });

  it('an absent model names the file looked for and the command that fetches it', () => {
    process.env.HF_HUB_CACHE = join(home, 'hub');
    const tok = errorOf(() => loadTokenizer('hf:Qwen/Qwen3-8B'));
    expect(tok.code).toBe('KINF_ERR_TOKENIZER_SPEC');
    expect(tok.message).toContain(
      `hf:Qwen/Qwen3-8B: model Qwen/Qwen3-8B is not in the Hugging Face cache (no ${join(home, 'hub', 'models--Qwen--Qwen3-8B', 'snapshots', 'main', 'tokenizer.json')}`,
    );
    expect(tok.message).toContain(
      '`huggingface-cli download Qwen/Qwen3-8B tokenizer.json tokenizer_config.json`',
    );
    const tpl = errorOf(() => loadChatTemplate('hf:Qwen/Qwen3-8B@v9'));
    expect(tpl.code).toBe('KINF_ERR_TEMPLATE_SPEC');
    expect(tpl.message).toContain('tokenizer_config.json --revision v9`');
  });

  it('a path that is not there is still reported as a path (a .json name is never a model id)', () => {
    const e = errorOf(() => loadTokenizer('hf:models/tokenizer.json'));
    expect(e.message).toMatch(/cannot read .*models\/tokenizer\.json/);
  });

  it("a fleet file keeps a model id for the cache and resolves paths against the file's directory", () => {
    const raw = {
      models: {
        a: { tokenizer: 'hf:Qwen/Qwen3-8B', chat_template: 'hf:Qwen/Qwen3-8B' },
        b: { tokenizer: 'hf:tok/tokenizer.json', chat_template: 'hf:tok/tokenizer_config.json' },
      },
      pods: [{ id: 'p', model: 'a', address: '10.0.0.1:8000' }],
    };
    const cfg = parseFleetConfig(raw, 'fleet.yaml', '/etc/kinference');
    expect(cfg.models.a).toMatchObject({ tokenizer: 'hf:Qwen/Qwen3-8B', chat_template: 'hf:Qwen/Qwen3-8B' });
    expect(cfg.models.b).toMatchObject({
      tokenizer: 'hf:/etc/kinference/tok/tokenizer.json',
      chat_template: 'hf:/etc/kinference/tok/tokenizer_config.json',
    });
  });
});
