import { describe, expect, it } from 'vitest';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { toKongSchema, type KongFieldEntry } from '../../../src/config/to-kong-schema.js';
import { processPluginConfig } from '../../../kong/stand-in/process-config.js';

const schema: KongFieldEntry[] = [
  { url: { type: 'string', required: true, default: 'redis://x', match: '^rediss?://' } },
  { mode: { type: 'string', required: true, default: 'a', one_of: ['a', 'b'] } },
  { n: { type: 'integer', required: true, default: 3, between: [1, 5] } },
  { ratio: { type: 'number', required: true, default: 0.5, between: [0, 1] } },
  { on: { type: 'boolean', required: true, default: false } },
  { opt: { type: 'string', required: false } },
  { must: { type: 'string', required: true } },
  {
    pods: {
      type: 'map',
      required: false,
      keys: { type: 'string' },
      values: {
        type: 'array',
        elements: { type: 'string', match_any: { patterns: ['^a', '^b'], err: 'must start with a or b' } },
      },
    },
  },
];

describe('Kong config processing (what StartInstance receives)', () => {
  it('fills defaults and leaves unset optional fields out (plugins are read back without nulls)', () => {
    const r = processPluginConfig(schema, { must: 'x' });
    expect(r).toEqual({
      ok: true,
      config: { url: 'redis://x', mode: 'a', n: 3, ratio: 0.5, on: false, must: 'x' },
    });
    // An explicit null on an optional field: stored as null, read back without it.
    expect(processPluginConfig(schema, { must: 'x', opt: null })).toEqual(r);
  });

  it('does not default an explicit null: on a required field it is missing, as Kong says', () => {
    expect(processPluginConfig(schema, { must: 'x', n: null })).toEqual({
      ok: false,
      errors: { n: 'required field missing' },
    });
  });

  it('keeps given values and validates nested maps and arrays', () => {
    const r = processPluginConfig(schema, { must: 'x', pods: { m: ['a1', 'b2'] }, on: true });
    expect(r.ok && r.config.pods).toEqual({ m: ['a1', 'b2'] });
    const bad = processPluginConfig(schema, { must: 'x', pods: { m: ['c'] } });
    expect(bad).toEqual({ ok: false, errors: { 'pods.m.1': 'must start with a or b' } });
  });

  it("reports Kong's messages per field", () => {
    const r = processPluginConfig(schema, {
      url: 'http://x',
      mode: 'c',
      n: 9,
      ratio: 'x',
      on: 1,
      extra: true,
      opt: '',
    });
    expect(r).toEqual({
      ok: false,
      errors: {
        url: 'invalid value: http://x',
        mode: 'expected one of: a, b',
        n: 'value should be between 1 and 5',
        ratio: 'expected a number',
        on: 'expected a boolean',
        opt: 'length must be at least 1',
        must: 'required field missing',
        extra: 'unknown field',
      },
    });
    expect(processPluginConfig(schema, { must: 'x', n: 2.5 })).toMatchObject({
      errors: { n: 'expected an integer' },
    });
  });

  it("says in words what the plugin's pattern fields take, not a regex or 'invalid value' (issue #34)", () => {
    const r = processPluginConfig(toKongSchema(PluginConfigSchema), {
      tokenizer: 'Qwen/Qwen3-8B',
      redis_url: '127.0.0.1:6390',
      model_pods: { m: ['10.0.0.7'] },
    });
    expect(r).toEqual({
      ok: false,
      errors: {
        tokenizer: expect.stringMatching(
          /^expected a tokenizer spec: tiktoken:<encoding> .* or hf:<path to tokenizer.json, model directory or Hugging Face model id/,
        ),
        redis_url: 'expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS',
        'model_pods.m.1': 'expected host:port (e.g. 10.0.0.7:8000; port 1–65535)',
      },
    });
  });

  it('treats an empty map and an empty array alike, as cjson does', () => {
    expect(processPluginConfig(schema, { must: 'x', pods: [] })).toMatchObject({
      ok: true,
      config: { pods: {} },
    });
  });
});
