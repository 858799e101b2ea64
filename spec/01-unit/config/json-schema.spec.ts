import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';

const schema = JSON.parse(
  readFileSync(new URL('../../../schemas/plugin-config.schema.json', import.meta.url), 'utf8'),
) as Record<string, unknown>;
const check = new Ajv({ strict: false }).compile(schema);

// schemas/plugin-config.schema.json is for checking configs as users write them (CI on kong.yaml): a generic
// validator must accept what the plugin accepts, defaults left out, and refuse what it refuses.
describe('schemas/plugin-config.schema.json with a generic JSON Schema validator (ajv)', () => {
  it.each([
    ['an empty config (every field defaulted)', {}],
    [
      'the docs example',
      {
        redis_url: 'redis://redis:6379/0',
        tokenizer: 'hf:/models/qwen3/tokenizer.json',
        chat_template: 'hf:/models/qwen3/tokenizer_config.json',
        otlp_endpoint: 'http://jaeger:4318/v1/traces',
      },
    ],
    ['static pods', { index: 'memory', model_pods: { m: ['10.0.0.1:8000'] } }],
  ])('accepts %s, as the plugin does', (_name, config) => {
    expect(check(config), JSON.stringify(check.errors)).toBe(true);
    expect(() => validateConfig(PluginConfigSchema, config, 'test')).not.toThrow();
  });

  it.each([
    ['an unknown field', { redis_ulr: 'redis://x' }],
    ['a wrong type', { redis_timeout_ms: 'fast' }],
    ['a value out of bounds', { trace_sample_ratio: 2 }],
    ['a bad pattern', { redis_url: 'http://redis' }],
  ])('refuses %s, as the plugin does', (_name, config) => {
    expect(check(config)).toBe(false);
    expect(() => validateConfig(PluginConfigSchema, config, 'test')).toThrow();
  });
});
