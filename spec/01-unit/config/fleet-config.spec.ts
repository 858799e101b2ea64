import { describe, expect, it } from 'vitest';
import { CollectorSectionSchema } from '../../../src/config/collector-section.js';
import { parseFleetConfig, resolveModel } from '../../../src/config/fleet-config.js';
import {
  redisSentinelSettings,
  PluginConfigSchema,
  pluginConfigFromKong,
  pluginConfigProblems,
} from '../../../src/config/plugin-config.js';
import { closestKey, validateConfig } from '../../../src/config/validate.js';

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
    // A request's model name is looked up among the file's models only, not Object.prototype's members.
    for (const name of ['toString', 'constructor', '__proto__']) expect(resolveModel(c, name)).toBeNull();
    expect(
      errorOf(() => parseFleetConfig({ ...good, pods: [{ ...good.pods[0], model: 'toString' }] }, 'f', '/')),
    ).toContain('pods.0.model: "toString" is not listed under models');
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
    expect(wrongType).toContain(
      'models.m.block_size: expected a whole number from 1 to 4096 (got "sixteen") — Tokens per KV-cache block',
    );
  });

  it('checks cross-field rules', () => {
    expect(
      errorOf(() => parseFleetConfig({ ...good, pods: [{ ...good.pods[0], model: 'other' }] }, 'f', '/')),
    ).toContain('pods.0.model: "other" is not listed under models');
    expect(
      errorOf(() => parseFleetConfig({ ...good, pods: [good.pods[0], good.pods[0]] }, 'f', '/')),
    ).toContain('duplicate pod id');
    expect(errorOf(() => parseFleetConfig({ models: good.models }, 'f', '/'))).toContain('pods:');
    expect(
      errorOf(() => parseFleetConfig({ ...good, redis_cluster_nodes: ['10.0.0.9:7001'] }, 'f', '/')),
    ).toContain('redis_cluster_nodes: set, but redis_cluster is not');
    const c = parseFleetConfig(
      { ...good, redis_cluster: true, redis_cluster_nodes: ['10.0.0.9:7001'] },
      'f',
      '/',
    );
    expect(c.redis_cluster_nodes).toEqual(['10.0.0.9:7001']);
    expect(
      errorOf(() =>
        parseFleetConfig({ ...good, redis_cluster: true, redis_cluster_nodes: ['10.0.0.9'] }, 'f', '/'),
      ),
    ).toContain('redis_cluster_nodes.0');
  });

  it('checks the Sentinel fields together, each problem naming its field', () => {
    const sentinels = {
      redis_sentinels: ['10.0.0.5:26379', '10.0.0.6:26379'],
      redis_sentinel_master: 'kinf',
    };
    const c = parseFleetConfig({ ...good, ...sentinels, redis_sentinel_password: 's3cret' }, 'f', '/');
    expect(c.redis_sentinels).toEqual(sentinels.redis_sentinels);
    expect(redisSentinelSettings(c)).toEqual({
      nodes: sentinels.redis_sentinels,
      master: 'kinf',
      password: 's3cret',
    });
    expect(redisSentinelSettings(good as never)).toBeUndefined();
    expect(
      errorOf(() => parseFleetConfig({ ...good, redis_sentinels: ['10.0.0.5:26379'] }, 'f', '/')),
    ).toContain('redis_sentinel_master: required with redis_sentinels');
    expect(
      errorOf(() => parseFleetConfig({ ...good, ...sentinels, redis_cluster: true }, 'f', '/')),
    ).toContain('redis_sentinels: set together with redis_cluster');
    expect(
      errorOf(() =>
        parseFleetConfig({ ...good, redis_sentinel_master: 'kinf', redis_sentinel_tls: true }, 'f', '/'),
      ),
    ).toContain('redis_sentinel_master, redis_sentinel_tls: set, but redis_sentinels is not');
    expect(
      errorOf(() =>
        parseFleetConfig({ ...good, ...sentinels, redis_sentinels: ['10.0.0.5:99999'] }, 'f', '/'),
      ),
    ).toContain('redis_sentinels.0: 10.0.0.5:99999: the port must be 1–65535');
    expect(
      errorOf(() => parseFleetConfig({ ...good, ...sentinels, redis_sentinels: ['s0'] }, 'f', '/')),
    ).toContain('redis_sentinels.0');
    // A password of the wrong type is refused without being echoed.
    const numeric = errorOf(() =>
      parseFleetConfig({ ...good, ...sentinels, redis_sentinel_password: 918273 }, 'f', '/'),
    );
    expect(numeric).toContain('redis_sentinel_password');
    expect(numeric).not.toContain('918273');
  });
});

describe('fleet config: unknown keys are errors, not silently ignored', () => {
  const pod = good.pods[0]!;
  const cases: [string, Record<string, unknown>, string][] = [
    [
      'a pod key',
      { ...good, pods: [{ ...pod, kv_event: 'tcp://10.0.0.7:5557' }] },
      'pods.0.kv_event: unknown key; did you mean "kv_events"?',
    ],
    [
      'a collector key',
      { ...good, collector: { scrape_intervall_ms: 100 } },
      'collector.scrape_intervall_ms: unknown key; did you mean "scrape_interval_ms"?',
    ],
    [
      'a top-level key',
      { ...good, redis_ulr: 'redis://x:6379' },
      'redis_ulr: unknown key; did you mean "redis_url"?',
    ],
    [
      'a model key',
      { ...good, models: { 'Qwen/Qwen3-8B': { ...good.models['Qwen/Qwen3-8B'], blocksize: 16 } } },
      'models.Qwen/Qwen3-8B.blocksize: unknown key; did you mean "block_size"?',
    ],
    [
      'an emulator key',
      { ...good, emulator: { timescale: 2 } },
      'emulator.timescale: unknown key; did you mean "time_scale"?',
    ],
    [
      'a router key',
      { ...good, router: { stale_after: 100 } },
      'router.stale_after: unknown key; did you mean "stale_after_ms"?',
    ],
    [
      'a kubernetes key',
      { models: good.models, kubernetes: { namespace: 'n', service: 's', model: 'Qwen/Qwen3-8B', port: 1 } },
      'kubernetes.port: unknown key',
    ],
  ];
  it.each(cases)('%s', (_what, raw, expected) => {
    const msg = errorOf(() => parseFleetConfig(raw, 'fleet.yaml', '/'));
    expect(msg).toContain('fleet.yaml: invalid configuration');
    expect(msg).toContain(expected);
  });

  it('lists the known keys when no key is close', () => {
    const msg = errorOf(() => parseFleetConfig({ ...good, pods: [{ ...pod, zzzzzz: 1 }] }, 'f', '/'));
    expect(msg).toContain('pods.0.zzzzzz: unknown key; known keys here: id, model, address, kv_events');
  });

  it('suggests only close keys', () => {
    expect(closestKey('kv_event', ['kv_events', 'kv_events_replay'])).toBe('kv_events');
    expect(closestKey('Listen', ['listen', 'log_level'])).toBe('listen');
    expect(closestKey('scrape-interval-ms', ['scrape_interval_ms'])).toBe('scrape_interval_ms');
    expect(closestKey('queue', ['listen', 'log_level'])).toBeNull();
  });
});

describe('fleet config: addresses, endpoints and ranges', () => {
  const pod = good.pods[0]!;
  const bad = (over: Record<string, unknown>, collector?: Record<string, unknown>): string =>
    errorOf(() =>
      parseFleetConfig(
        { ...good, pods: [{ ...pod, ...over }], ...(collector ? { collector } : {}) },
        'f',
        '/',
      ),
    );

  it('a ZMQ endpoint needs a numeric port of 1–65535', () => {
    for (const kv_events of [
      'tcp://127.0.0.1:notaport',
      'tcp://127.0.0.1',
      'tcp://*:5557',
      'tcp://h:0',
      'tcp://h:65536',
    ])
      expect(bad({ kv_events }), kv_events).toContain(
        `pods.0.kv_events: not in the expected form (got "${kv_events}") — vLLM KV-event publisher: tcp://host:port`,
      );
    expect(bad({ kv_events_replay: 'tcp://h:x' })).toContain(
      'pods.0.kv_events_replay: not in the expected form',
    );
    const ok = {
      ...good,
      pods: [{ ...pod, kv_events: 'tcp://[::1]:5557', kv_events_replay: 'ipc:///tmp/r' }],
    };
    expect(() => parseFleetConfig(ok, 'f', '/')).not.toThrow();
  });

  it("a model's default_chat_template_kwargs must be a JSON object, as vLLM's flag takes", () => {
    const withKwargs = (v: string): unknown =>
      parseFleetConfig(
        {
          ...good,
          models: { 'Qwen/Qwen3-8B': { ...good.models['Qwen/Qwen3-8B'], default_chat_template_kwargs: v } },
        },
        'f',
        '/',
      );
    expect(errorOf(() => withKwargs('{enable_thinking: false}'))).toContain(
      'models.Qwen/Qwen3-8B.default_chat_template_kwargs: not JSON',
    );
    expect(errorOf(() => withKwargs('[1]'))).toContain('must be a JSON object');
    expect(() => withKwargs('{"enable_thinking": false}')).not.toThrow();
  });

  it('kv_events and kv_events_replay must differ', () => {
    expect(bad({ kv_events: 'tcp://h:5557', kv_events_replay: 'tcp://h:5557' })).toContain(
      'pods.0.kv_events_replay: the same endpoint as kv_events',
    );
  });

  it('with data parallelism, the ranks of kv_events and kv_events_replay (port + r) must not meet', () => {
    expect(
      bad({ kv_events: 'tcp://h:5557', kv_events_replay: 'tcp://h:5558', data_parallel_size: 2 }),
    ).toContain(
      'pods.0.kv_events_replay: rank r uses port + r of both endpoints, and with data_parallel_size 2',
    );
    const ok = (over: Record<string, unknown>): void =>
      void parseFleetConfig({ ...good, pods: [{ ...pod, ...over }] }, 'f', '/');
    expect(() =>
      ok({ kv_events: 'tcp://h:5557', kv_events_replay: 'tcp://h:5559', data_parallel_size: 2 }),
    ).not.toThrow();
    expect(() =>
      ok({ kv_events: 'tcp://h:5557', kv_events_replay: 'tcp://g:5558', data_parallel_size: 2 }),
    ).not.toThrow();
    expect(() => ok({ kv_events: 'tcp://h:5557', kv_events_replay: 'tcp://h:5558' })).not.toThrow();

    const parseK8s = (over: Record<string, unknown>): unknown =>
      parseFleetConfig(
        {
          models: good.models,
          kubernetes: { namespace: 'n', service: 's', model: 'Qwen/Qwen3-8B', kv_events_port: 5557, ...over },
        },
        'f',
        '/',
      );
    const k8s = (over: Record<string, unknown>): string => errorOf(() => parseK8s(over));
    expect(k8s({ kv_events_replay_port: 5557 })).toContain(
      'kubernetes.kv_events_replay_port: the same port as kv_events_port',
    );
    expect(k8s({ kv_events_replay_port: 5559, data_parallel_size: 4 })).toContain(
      'kubernetes.kv_events_replay_port: ranks use ports 5557–5560 and 5559–5562, which overlap (data_parallel_size 4)',
    );
    expect(() => parseK8s({ kv_events_replay_port: 5561, data_parallel_size: 4 })).not.toThrow();
  });

  it('a pod address needs a port of 0–65535 (0: the emulator picks one)', () => {
    expect(bad({ address: '10.0.0.7:70000' })).toContain('pods.0.address: not in the expected form');
    expect(() =>
      parseFleetConfig({ ...good, pods: [{ ...pod, address: '127.0.0.1:0' }] }, 'f', '/'),
    ).not.toThrow();
  });

  it('metrics must be a URL', () => {
    expect(bad({ metrics: 'http://h:notaport/metrics' })).toContain('pods.0.metrics: not a valid URL');
  });

  it('collector.listen is host:port (port 0–65535), [v6]:port or :port', () => {
    for (const listen of ['not-an-address', '127.0.0.1:99999', '127.0.0.1:', '::1:9090'])
      expect(bad({}, { listen }), listen).toContain(
        `collector.listen: not in the expected form (got "${listen}")`,
      );
    for (const listen of ['127.0.0.1:0', '0.0.0.0:9090', ':9090', '[::1]:9090', 'collector.local:9090'])
      expect(parseFleetConfig({ ...good, collector: { listen } }, 'f', '/').collector?.listen).toBe(listen);
  });

  it('index_retry_min_ms may not exceed index_retry_max_ms', () => {
    expect(bad({}, { index_retry_min_ms: 10000, index_retry_max_ms: 10 })).toContain(
      'collector.index_retry_min_ms: 10000 is greater than index_retry_max_ms (10)',
    );
    // Against the defaults too (max 5000).
    expect(bad({}, { index_retry_min_ms: 6000 })).toContain('greater than index_retry_max_ms (5000)');
    expect(() =>
      parseFleetConfig({ ...good, collector: { index_retry_min_ms: 50, index_retry_max_ms: 50 } }, 'f', '/'),
    ).not.toThrow();
  });

  it('the collector section alone takes its defaults', () => {
    expect(validateConfig(CollectorSectionSchema, {}, 'c').listen).toBe('127.0.0.1:9090');
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

  it('rejects an unknown field, as Kong does', () => {
    expect(errorOf(() => validateConfig(PluginConfigSchema, { redis_timeout: 25 }, 'kong'))).toContain(
      'redis_timeout: unknown key; did you mean "redis_timeout_ms"?',
    );
  });

  it('drops the keys Kong adds at run time before validating (they are not configuration)', () => {
    const fromKong = {
      block_size: 32,
      otlp_endpoint: null,
      route_id: 'r',
      service_id: null,
      __plugin_id: 'p',
      __ws_id: 'w',
      __key__: 'plugins:kinference:r::w',
      __seq__: 3,
    };
    expect(() => validateConfig(PluginConfigSchema, fromKong, 'kong')).toThrow(/__plugin_id: unknown key/);
    expect(validateConfig(PluginConfigSchema, pluginConfigFromKong(fromKong), 'kong').block_size).toBe(32);
  });

  it('redis_tls_* only with rediss://, and a client certificate only with its key', () => {
    const c = (o: Record<string, unknown>) => validateConfig(PluginConfigSchema, o, 'kong');
    const tls = { redis_url: 'rediss://u:p@redis:6380/0', redis_tls_ca_file: '/etc/redis/ca.crt' };
    expect(pluginConfigProblems(c(tls))).toEqual([]);
    expect(pluginConfigProblems(c({ ...tls, redis_tls_cert_file: '/c', redis_tls_key_file: '/k' }))).toEqual(
      [],
    );
    expect(pluginConfigProblems(c({ ...tls, redis_url: 'redis://redis:6379/0' }))).toEqual([
      'redis_tls_ca_file: set, but redis_url is not rediss:// (plain TCP): use rediss:// for TLS, or drop them',
    ]);
    expect(pluginConfigProblems(c({ ...tls, redis_tls_cert_file: '/c' }))).toEqual([
      'redis_tls_cert_file, redis_tls_key_file: a client certificate needs its key, and a key its certificate',
    ]);
  });

  it('redis_cluster_nodes only with redis_cluster (a rule across fields, not in the Kong schema)', () => {
    const c = (o: Record<string, unknown>) => validateConfig(PluginConfigSchema, o, 'kong');
    expect(pluginConfigProblems(c({}))).toEqual([]);
    expect(pluginConfigProblems(c({ redis_cluster: true, redis_cluster_nodes: ['h:7001'] }))).toEqual([]);
    expect(pluginConfigProblems(c({ redis_cluster_nodes: [] }))).toEqual([]);
    expect(pluginConfigProblems(c({ redis_cluster_nodes: ['h:7001'] }))).toEqual([
      expect.stringContaining('redis_cluster_nodes: set, but redis_cluster is not'),
    ]);
  });

  it('default_chat_template_kwargs must hold a JSON object (a rule the Kong schema cannot say)', () => {
    const c = (o: Record<string, unknown>) => validateConfig(PluginConfigSchema, o, 'kong');
    expect(pluginConfigProblems(c({ default_chat_template_kwargs: '{"enable_thinking": false}' }))).toEqual(
      [],
    );
    expect(pluginConfigProblems(c({ default_chat_template_kwargs: '"x"' }))).toEqual([
      expect.stringContaining('default_chat_template_kwargs: must be a JSON object'),
    ]);
    expect(pluginConfigProblems(c({ default_chat_template_kwargs: '{x' }))).toEqual([
      expect.stringContaining('default_chat_template_kwargs: not JSON'),
    ]);
  });

  it('ports of model_pods and redis_cluster_nodes must be 1–65535 (the Kong pattern only says 1–5 digits)', () => {
    const c = (o: Record<string, unknown>) => validateConfig(PluginConfigSchema, o, 'kong');
    expect(pluginConfigProblems(c({ model_pods: { m: ['a:1', 'b:65535'] } }))).toEqual([]);
    expect(
      pluginConfigProblems(
        c({ model_pods: { m: ['a:0', 'b:99999'] }, redis_cluster: true, redis_cluster_nodes: ['h:70000'] }),
      ),
    ).toEqual([
      'redis_cluster_nodes.0: h:70000: the port must be 1–65535',
      'model_pods.m.0: a:0: the port must be 1–65535',
      'model_pods.m.1: b:99999: the port must be 1–65535',
    ]);
    // Kong refuses empty strings, map keys included.
    expect(pluginConfigProblems(c({ model_pods: { '': ['a:1'] }, lora_adapters: { '': 'm' } }))).toEqual([
      'model_pods: a model name is empty',
      'lora_adapters: an adapter name is empty',
    ]);
    expect(() => c({ lora_adapters: { a: '' } })).toThrow(/lora_adapters/);
  });

  it('says in words what a field takes, as the plugin logs it at load (issue #34)', () => {
    const msg = errorOf(() =>
      validateConfig(
        PluginConfigSchema,
        { redis_url: '127.0.0.1:6390', tokenizer: 'Qwen3-8B.json', redis_timeout_ms: 0 },
        'kinference plugin config',
      ),
    );
    expect(msg).toContain(
      'redis_url: expected a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS (got "127.0.0.1:6390")',
    );
    expect(msg).toContain(
      'tokenizer: expected a tokenizer spec: tiktoken:<encoding> (o200k_harmony, o200k_base, cl100k_base) or hf:<path to tokenizer.json, model directory or Hugging Face model id such as Qwen/Qwen3-8B> (got "Qwen3-8B.json")',
    );
    expect(msg).toContain('redis_timeout_ms: expected a whole number from 1 to 10000 (got 0)');
    expect(msg).not.toMatch(/\^|must match|Expected/);
  });

  it('rejects a bad enum with the field name and the values it takes', () => {
    expect(errorOf(() => validateConfig(PluginConfigSchema, { index: 'mongo' }, 'kong'))).toContain(
      'index: expected one of: "redis", "memory" (got "mongo")',
    );
  });
});
