import { describe, expect, it } from 'vitest';
import { parseFleetConfig, resolveModel } from '../../../src/config/fleet-config.js';
import { PluginConfigSchema } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';

const good = {
  redis_url: 'redis://127.0.0.1:6379/0',
  models: {
    'Qwen/Qwen3-8B': {
      tokenizer: 'hf:./qwen/tokenizer.json',
      chat_template: 'chatml',
      lora_adapters: ['sql'],
    },
  },
  pods: [
    { id: 'pod-a', model: 'Qwen/Qwen3-8B', address: '10.0.0.7:8000', kv_events: 'tcp://10.0.0.7:5557' },
    { id: 'pod-b', model: 'Qwen/Qwen3-8B', address: '10.0.0.8:8000' },
  ],
};

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected an error');
}

describe('fleet config', () => {
  it('applies defaults and resolves hf: paths against the file', () => {
    const c = parseFleetConfig(good, 'fleet.yaml', '/etc/kinference');
    expect(c.models['Qwen/Qwen3-8B']!.block_size).toBe(16);
    expect(c.models['Qwen/Qwen3-8B']!.tokenizer).toBe('hf:/etc/kinference/qwen/tokenizer.json');
    expect(c.redis_key_prefix).toBe('kinf');
    expect(resolveModel(c, 'sql')).toEqual({ model: 'Qwen/Qwen3-8B', lora: 'sql' });
    expect(resolveModel(c, 'Qwen/Qwen3-8B')).toEqual({ model: 'Qwen/Qwen3-8B', lora: null });
    expect(resolveModel(c, 'nope')).toBeNull();
  });

  it('names the file, the field and what was expected', () => {
    const bad = { ...good, pods: [{ ...good.pods[0], address: 'no-port' }] };
    const msg = errorOf(() => parseFleetConfig(bad, 'fleet.yaml', '/'));
    expect(msg).toContain('fleet.yaml: invalid configuration');
    expect(msg).toContain('pods.0.address');
    expect(msg).toContain('(got "no-port") — host:port the gateway sends requests to');
    const wrongType = errorOf(() =>
      parseFleetConfig({ ...good, models: { m: { block_size: 'sixteen' } } }, 'f.yaml', '/'),
    );
    expect(wrongType).toContain('models.m.block_size: Expected integer');
  });

  it('checks cross-field rules', () => {
    expect(
      errorOf(() => parseFleetConfig({ ...good, pods: [{ ...good.pods[0], model: 'other' }] }, 'f', '/')),
    ).toContain('pods.0.model: "other" is not listed under models');
    expect(
      errorOf(() => parseFleetConfig({ ...good, pods: [good.pods[0], good.pods[0]] }, 'f', '/')),
    ).toContain('duplicate pod id');
    expect(errorOf(() => parseFleetConfig({ models: good.models }, 'f', '/'))).toContain('pods:');
  });
});

describe('plugin config', () => {
  it('fills every default and reads Kong nulls as unset', () => {
    const c = validateConfig(
      PluginConfigSchema,
      { otlp_endpoint: null, model_pods: null, route_id: null },
      'kong',
    );
    expect(c.block_size).toBe(16);
    expect(c.index).toBe('redis');
    expect(c.otlp_endpoint).toBeUndefined();
    expect(c.fallback).toBe('least-loaded');
  });

  it('every field has a Kong-valid description (10–500 chars)', () => {
    for (const [name, f] of Object.entries(PluginConfigSchema.properties)) {
      const d = (f as { description?: string }).description ?? '';
      expect(d.length, name).toBeGreaterThanOrEqual(10);
      expect(d.length, name).toBeLessThanOrEqual(500);
    }
  });

  it('rejects a bad enum with the field name', () => {
    expect(errorOf(() => validateConfig(PluginConfigSchema, { index: 'mongo' }, 'kong'))).toContain('index');
  });
});
