import { describe, expect, it } from 'vitest';
import {
  jsonNestingDepth,
  MAX_JSON_DEPTH,
  pyInt,
  pyJsonDumps,
  pyLoads,
  pyRepr,
  pyToJs,
} from '../../../emulator/server/py-json.js';
import { internalServerError, sanitizeMessage } from '../../../emulator/server/vllm-errors.js';

// Expected values are CPython's (json.loads, repr, json.dumps, int), run on the same inputs.

describe("json.loads' errors and values", () => {
  it('reports the message and code-point position CPython reports', () => {
    const cases: [string, string, number][] = [
      ['{"model": "m", "messages": [', 'Expecting value', 28],
      ['{', 'Expecting property name enclosed in double quotes', 1],
      ['', 'Expecting value', 0],
      [' ', 'Expecting value', 1],
      ['{"a":1,}', 'Expecting property name enclosed in double quotes', 7],
      ['[1,]', 'Expecting value', 3],
      ['{"a" 1}', "Expecting ':' delimiter", 5],
      ['"abc', 'Unterminated string starting at', 0],
      ['"a\\x"', 'Invalid \\escape', 2],
      ['"\\u12g4"', 'Invalid \\uXXXX escape', 2],
      ['"a\nb"', 'Invalid control character at', 2],
      ['01', 'Extra data', 1],
      ['{"😀": x}', 'Expecting value', 6],
      ['[1] x', 'Extra data', 4],
      ['{"a": "\\ud83d\\ude00", }', 'Expecting property name enclosed in double quotes', 22],
    ];
    for (const [text, msg, pos] of cases)
      expect(pyLoads(text), JSON.stringify(text)).toEqual({ ok: false, decodeError: true, msg, pos });
    expect(pyLoads('1'.repeat(4301))).toEqual({ ok: false, decodeError: false });
  });

  it('reads NaN and Infinity, and keeps ints and floats apart for repr', () => {
    const r = pyLoads(
      '{"a": [1.0, 1e16, 1e-05, -0.0, NaN, Infinity, 12345678901234567890, true, null, "it\'s", "q\\"\'",' +
        ' "\\u0000\\u0085\\u00a0\\u2028😀\\ud800\\t\\\\"], "a": 2, "b": -0}',
    );
    if (!r.ok) throw new Error('not JSON');
    // A repeated key keeps its place and takes the last value.
    expect(pyRepr(r.value)).toBe("{'a': 2, 'b': 0}");
    const list = pyLoads(
      '[1.0, 1e16, 1e-05, -0.0, NaN, Infinity, 12345678901234567890, true, null, "it\'s", "q\\"\'",' +
        ' "\\u0000\\u0085\\u00a0\\u2028😀\\ud800\\t\\\\"]',
    );
    if (!list.ok) throw new Error('not JSON');
    expect(pyRepr(list.value)).toBe(
      `[1.0, 1e+16, 1e-05, -0.0, nan, inf, 12345678901234567890, True, None, "it's", 'q"\\'', '\\x00\\x85\\xa0\\u2028😀\\ud800\\t\\\\']`,
    );
    expect(pyToJs(list.value)).toEqual([
      1,
      1e16,
      1e-5,
      -0,
      NaN,
      Infinity,
      12345678901234567000,
      true,
      null,
      "it's",
      'q"\'',
      '\u0000\u0085\u00a0\u2028😀\ud800\t\\',
    ]);
  });
});

describe('json.dumps, int() and sanitize_message', () => {
  it("json.dumps' defaults: spaced separators, non-ASCII escaped", () => {
    expect(
      pyJsonDumps({
        error: { message: 'é 😀 \u007f "q" \\ /\n', type: 'BadRequestError', param: null, code: 400 },
      }),
    ).toBe(
      '{"error": {"message": "\\u00e9 \\ud83d\\ude00 \\u007f \\"q\\" \\\\ /\\n", "type": "BadRequestError", "param": null, "code": 400}}',
    );
  });

  it('int() of a header value: whitespace, a sign and underscores pass; anything else is refused', () => {
    expect([' 1_0 ', '+5', '-1', '1__0', '', '1.0', 'abc', '\xa07\x85'].map(pyInt)).toEqual([
      10n,
      5n,
      -1n,
      null,
      null,
      null,
      null,
      7n,
    ]);
  });

  it('cuts paths and traceback frames out of messages, as vLLM does to every error', () => {
    expect(sanitizeMessage('see /home/u/x.txt and a/b/c.py or /tmp/q, ok /a/b.c_d/e.f')).toBe(
      'see <path> and a<path> or <path>, ok <path>/e.f',
    );
    expect(sanitizeMessage('The model `Qwen/Qwen3-8B` does not exist.')).toBe(
      'The model `Qwen/Qwen3-8B` does not exist.',
    );
    expect(sanitizeMessage('<Request at 0x7f12ab> failed\n')).toBe('<Request> failed');
  });
});

describe('nesting json.loads does not recurse into', () => {
  const nest = (n: number, inner = '') => '['.repeat(n) + inner + ']'.repeat(n);

  it('is refused past MAX_JSON_DEPTH as no JSONDecodeError, without a JS stack overflow', () => {
    expect(pyLoads(nest(MAX_JSON_DEPTH, 'NaN')).ok).toBe(true);
    expect(pyLoads(nest(MAX_JSON_DEPTH + 1, 'NaN'))).toEqual({ ok: false, decodeError: false });
    expect(pyLoads('{"a": '.repeat(100_000))).toEqual({ ok: false, decodeError: false });
    // A decode error met before the limit is reported as such.
    expect(pyLoads(`[x${'['.repeat(100_000)}`)).toMatchObject({ ok: false, decodeError: true, pos: 1 });
  });

  it('is measured without recursion, strings skipped', () => {
    expect(jsonNestingDepth('{"a": [1, {"b": "[[[\\"[["}], "c": []}')).toBe(3);
    expect(jsonNestingDepth(nest(1_000_000))).toBe(1_000_000);
  });

  it("a JS stack overflow is answered as Python's RecursionError by vLLM's catch-all handler", () => {
    let overflow: unknown;
    const recurse = (n: number): number => recurse(n + 1) + 1;
    try {
      recurse(0);
    } catch (e) {
      overflow = e;
    }
    expect(internalServerError(overflow)).toEqual({
      status: 500,
      type: 'InternalServerError',
      message: 'maximum recursion depth exceeded',
      param: null,
    });
    expect(internalServerError(new TypeError('boom')).message).toBe('boom');
  });
});
