/**
 * Our hf: templates render as vLLM's Python jinja2 does (src/tokenize/chat-template/python-jinja.ts).
 *
 * The expected outputs are real jinja2 3.1.6 renders, made by
 *
 *     python3 scripts/jinja-golden.py
 *
 * which writes spec/fixtures/jinja/python-jinja-golden.json (cases and goldens both live in the script). This
 * spec only reads the fixture: no Python needed. Each case fails with @huggingface/jinja's own Interpreter.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Environment, Interpreter, parse, tokenize } from '@huggingface/jinja';
import { describe, expect, it } from 'vitest';
import { parseChatBody } from '../../../src/core/request.js';
import { pyStrip } from '../../../src/core/python-str.js';
import { INTERNALS, PythonInterpreter } from '../../../src/tokenize/chat-template/python-jinja.js';
import { loadChatTemplate } from '../../../src/tokenize/index.js';
import { QWEN3_DIR, QWEN3_TEMPLATE } from '../../helpers/qwen3.js';

interface GoldenCase {
  name: string;
  /** Inline template, or `config: "qwen3"` for the shipped Qwen3 tokenizer_config.json. */
  template?: string;
  config?: 'qwen3';
  template_sha256?: string;
  /** The request's JSON text, as sent (so `1.0` stays a float, as json.loads reads it). */
  body: string;
  output: string;
}

const fixture = JSON.parse(
  readFileSync(new URL('../../fixtures/jinja/python-jinja-golden.json', import.meta.url), 'utf8'),
) as { jinja2: string; cases: GoldenCase[] };

const dir = mkdtempSync(join(tmpdir(), 'kinf-pyjinja-'));

function render(c: GoldenCase, i: number): string {
  let spec = QWEN3_TEMPLATE;
  if (c.config !== 'qwen3') {
    const path = join(dir, `${i}.jinja`);
    writeFileSync(path, c.template!);
    spec = `hf:${path}`;
  }
  const parsed = parseChatBody(c.body);
  if (!parsed.ok) throw new Error(parsed.detail);
  // loadChatTemplate, not createHfTemplate: Python's numbers (1.0) come back as production puts them back.
  return loadChatTemplate(spec).render(parsed.request);
}

describe(`hf: templates print and strip as Python's jinja2 ${fixture.jinja2}`, () => {
  it('the fixture covers the cases the script makes', () => {
    expect(fixture.cases.length).toBe(15);
  });

  it.each(fixture.cases.map((c, i) => [c.name, c, i] as const))('%s', (_name, c, i) => {
    expect(render(c, i)).toBe(c.output);
  });

  it('the Qwen3 goldens were made from the shipped template (else rerun the script)', () => {
    const shipped = (
      JSON.parse(readFileSync(`${QWEN3_DIR}tokenizer_config.json`, 'utf8')) as { chat_template: string }
    ).chat_template;
    const sha = createHash('sha256').update(shipped).digest('hex');
    for (const c of fixture.cases.filter((x) => x.config === 'qwen3')) expect(c.template_sha256).toBe(sha);
  });
});

describe('python-jinja.ts: the patch is applied', () => {
  it("overrides methods @huggingface/jinja's Interpreter still has (an upgrade that renames them fails here)", () => {
    const own = Object.getOwnPropertyNames(PythonInterpreter.prototype).filter((m) => m !== 'constructor');
    expect(own.sort()).toEqual(
      ['applyFilter', 'evaluateBinaryExpression', 'evaluateBlock', 'evaluateMemberExpression'].sort(),
    );
    const base = Interpreter.prototype as unknown as Record<string, unknown>;
    for (const m of [...own, ...INTERNALS]) expect(typeof base[m], m).toBe('function');
  });

  it('the library alone still differs (if this fails, the library fixed it: drop that override)', () => {
    const program = parse(
      tokenize("{{ b }}|{{ s.lstrip('\\n') }}|{{ [1, 'a'] | string }}", {
        lstrip_blocks: true,
        trim_blocks: true,
      }),
    );
    const run = (I: typeof Interpreter): unknown => {
      const env = new Environment();
      env.set('b', true);
      env.set('s', '\n  x\n');
      return new I(env).run(program).value;
    };
    expect(run(Interpreter)).toBe('true|x\n|[1, "a"]');
    expect(run(PythonInterpreter as unknown as typeof Interpreter)).toBe("True|  x\n|[1, 'a']");
  });

  it('pyStrip: chars by code point, so an astral character never matches half of another', () => {
    expect(pyStrip('😀a😀', '😀', true, true)).toBe('a');
    expect(pyStrip('😁a', '😀', true, true)).toBe('😁a'); // same high surrogate, other low one
    expect(pyStrip('\ufeff\u0085 a\u001c', null, true, true)).toBe('\ufeff\u0085 a');
  });
});
