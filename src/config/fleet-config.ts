// The fleet YAML (models, pods, kubernetes, router, sections): its schema and parseFleetConfig.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { parse as parseYaml } from 'yaml';
import { KinferenceError } from '../core/errors.js';
import { isHfModelId } from '../tokenize/hf-source.js';
import { PluginConfigSchema, pluginConfigProblems, templateKwargsProblem } from './plugin-config.js';
import { validateConfig } from './validate.js';
import { CollectorSectionSchema, checkCollectorSection } from './collector-section.js';
import { EmulatorSectionSchema } from './emulator-section.js';
import { POD_ADDRESS_PATTERN, ZMQ_ENDPOINT_PATTERN } from './addresses.js';

/**
 * The one YAML file that describes a fleet for the collector, `explain`, the emulator and the demo
 * (docs/collector.md#running-it). Paths in `hf:` specs are resolved against the file's directory (model ids
 * are looked up in the Hugging Face cache). Every object is strict: an unknown key (a typo such as
 * `kv_event:`) is an error naming the key and the closest known one, not a setting silently ignored.
 */

const STRICT = { additionalProperties: false } as const;

const zmqEndpoint = (what: string): ReturnType<typeof Type.String> =>
  Type.String({
    pattern: ZMQ_ENDPOINT_PATTERN,
    description: `${what}: tcp://host:port (port 1–65535), ipc://path or inproc://name`,
  });

export const ModelSchema = Type.Object(
  {
    tokenizer: PluginConfigSchema.properties.tokenizer,
    chat_template: PluginConfigSchema.properties.chat_template,
    default_chat_template_kwargs: PluginConfigSchema.properties.default_chat_template_kwargs,
    block_size: PluginConfigSchema.properties.block_size,
    max_prompt_tokens: PluginConfigSchema.properties.max_prompt_tokens,
    lora_adapters: Type.Optional(
      Type.Array(Type.String({ minLength: 1 }), {
        description: 'LoRA adapter names served under this base model.',
      }),
    ),
  },
  STRICT,
);

export const PodSchema = Type.Object(
  {
    id: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.:-]+$' }),
    model: Type.String({ minLength: 1 }),
    address: Type.String({
      pattern: POD_ADDRESS_PATTERN,
      description: 'host:port the gateway sends requests to (port 1–65535; 0 lets the emulator pick one)',
    }),
    kv_events: Type.Optional(zmqEndpoint('vLLM KV-event publisher')),
    kv_events_replay: Type.Optional(zmqEndpoint('vLLM KV-event replay endpoint')),
    kv_events_topic: Type.Optional(
      Type.String({ description: 'the topic vLLM publishes on (its --kv-events-config topic; default "")' }),
    ),
    metrics: Type.Optional(
      Type.String({ pattern: '^https?://\\S+$', description: "the pod's Prometheus /metrics URL" }),
    ),
    data_parallel_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, default: 1 })),
    data_parallel_start_rank: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 65535,
        default: 0,
        description:
          "the global DP rank of the server's first engine: vLLM --data-parallel-start-rank (hybrid DP, a node " +
          'whose ranks start above 0) or --data-parallel-rank (external DP, one rank per server). Rank g ' +
          'publishes on the KV-event ports + g and reports engine="g" in its metrics',
      }),
    ),
  },
  STRICT,
);

export const KubernetesSchema = Type.Object(
  {
    namespace: Type.String({ minLength: 1 }),
    service: Type.String({ minLength: 1 }),
    model: Type.String({ minLength: 1 }),
    http_port: Type.Integer({ default: 8000, minimum: 1, maximum: 65535 }),
    kv_events_port: Type.Integer({ default: 5557, minimum: 1, maximum: 65535 }),
    kv_events_replay_port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
    kv_events_topic: Type.Optional(Type.String()),
    metrics_path: Type.String({ default: '/metrics', pattern: '^/\\S*$', description: 'starts with /' }),
    data_parallel_size: Type.Integer({
      minimum: 1,
      maximum: 256,
      default: 1,
      description:
        "every pod's vLLM --data-parallel-size: rank r publishes on kv_events_port + r and is indexed as <pod>@dp<r>",
    }),
    not_ready_grace_ms: Type.Integer({
      default: 300_000,
      minimum: 0,
      description:
        'how long a pod failing its readiness probe (not terminating) stays followed, out of routing, with its ' +
        'index kept; then it is removed as if it had left. 0 removes it at once',
    }),
  },
  STRICT,
);

/** Router options for `explain`: the plugin's own fields, same names and defaults. */
export const RouterSectionSchema = Type.Pick(
  PluginConfigSchema,
  [
    'redis_timeout_ms',
    'index',
    'fallback',
    'stale_after_ms',
    'reservation_ttl_ms',
    'shed_ttft_slo_ms',
    'max_body_bytes',
    'otlp_endpoint',
    'service_name',
  ],
  STRICT,
);

export const FleetConfigSchema = Type.Object(
  {
    redis_url: PluginConfigSchema.properties.redis_url,
    redis_cluster: PluginConfigSchema.properties.redis_cluster,
    redis_cluster_nodes: PluginConfigSchema.properties.redis_cluster_nodes,
    redis_sentinels: PluginConfigSchema.properties.redis_sentinels,
    redis_sentinel_master: PluginConfigSchema.properties.redis_sentinel_master,
    redis_sentinel_password: PluginConfigSchema.properties.redis_sentinel_password,
    redis_sentinel_tls: PluginConfigSchema.properties.redis_sentinel_tls,
    redis_tls_ca_file: PluginConfigSchema.properties.redis_tls_ca_file,
    redis_tls_cert_file: PluginConfigSchema.properties.redis_tls_cert_file,
    redis_tls_key_file: PluginConfigSchema.properties.redis_tls_key_file,
    redis_tls_servername: PluginConfigSchema.properties.redis_tls_servername,
    redis_key_prefix: PluginConfigSchema.properties.redis_key_prefix,
    models: Type.Record(Type.String({ minLength: 1 }), ModelSchema),
    pods: Type.Optional(Type.Array(PodSchema)),
    kubernetes: Type.Optional(KubernetesSchema),
    router: Type.Optional(RouterSectionSchema),
    collector: Type.Optional(CollectorSectionSchema),
    emulator: Type.Optional(EmulatorSectionSchema),
  },
  STRICT,
);

export type FleetConfig = Static<typeof FleetConfigSchema>;
export type ModelConfig = Static<typeof ModelSchema>;
export type PodConfig = Static<typeof PodSchema>;
export type RouterSection = Static<typeof RouterSectionSchema>;

/** A path in an `hf:` spec is the file's own (relative to its directory); a model id is left to the cache. */
function resolveSpec(spec: string, baseDir: string): string {
  if (!spec.startsWith('hf:')) return spec;
  const path = resolve(baseDir, spec.slice(3));
  return isHfModelId(spec.slice(3)) && !existsSync(path) ? spec : `hf:${path}`;
}

/** Two tcp:// endpoints on one host whose ports + 0 … n−1 (one per DP rank) share a port. */
function tcpRunsMeet(a: string, b: string, n: number): boolean {
  const split = (e: string): [string, number] | null => {
    const i = e.lastIndexOf(':');
    const port = Number(e.slice(i + 1));
    return e.startsWith('tcp://') && Number.isInteger(port) ? [e.slice(0, i), port] : null;
  };
  const x = split(a);
  const y = split(b);
  return x !== null && y !== null && x[0] === y[0] && Math.abs(x[1] - y[1]) < n;
}

/** Cross-field checks TypeBox cannot express; messages name the file and the field. */
function checkFleet(cfg: FleetConfig, source: string): void {
  const problems: string[] = pluginConfigProblems(cfg).map((p) => `  ${p}`);
  if (Object.keys(cfg.models).length === 0) problems.push('  models: at least one model is required');
  for (const [name, m] of Object.entries(cfg.models)) {
    const kwargs = templateKwargsProblem(m.default_chat_template_kwargs);
    if (kwargs) problems.push(`  models.${name}.default_chat_template_kwargs: ${kwargs}`);
  }
  if (!cfg.pods && !cfg.kubernetes)
    problems.push('  pods: a pod list or a `kubernetes:` section is required');
  if (cfg.pods && cfg.kubernetes) problems.push('  pods: give either `pods:` or `kubernetes:`, not both');
  const ids = new Set<string>();
  const addresses = new Set<string>();
  (cfg.pods ?? []).forEach((p, i) => {
    if (!Object.hasOwn(cfg.models, p.model))
      problems.push(`  pods.${i}.model: "${p.model}" is not listed under models`);
    if (ids.has(p.id)) problems.push(`  pods.${i}.id: duplicate pod id "${p.id}"`);
    if (addresses.has(p.address)) problems.push(`  pods.${i}.address: duplicate address "${p.address}"`);
    ids.add(p.id);
    addresses.add(p.address);
  });
  (cfg.pods ?? []).forEach((p, i) => {
    const n = p.data_parallel_size ?? 1;
    if (p.kv_events && p.kv_events === p.kv_events_replay)
      problems.push(`  pods.${i}.kv_events_replay: the same endpoint as kv_events ("${p.kv_events}")`);
    else if (n > 1 && p.kv_events && p.kv_events_replay && tcpRunsMeet(p.kv_events, p.kv_events_replay, n))
      problems.push(
        `  pods.${i}.kv_events_replay: rank r uses port + r of both endpoints, and with data_parallel_size ${n} ` +
          `"${p.kv_events}" and "${p.kv_events_replay}" overlap`,
      );
    if (p.metrics && !URL.canParse(p.metrics))
      problems.push(`  pods.${i}.metrics: not a valid URL (got "${p.metrics}")`);
  });
  if (cfg.kubernetes && !Object.hasOwn(cfg.models, cfg.kubernetes.model))
    problems.push(`  kubernetes.model: "${cfg.kubernetes.model}" is not listed under models`);
  if (cfg.kubernetes?.kv_events_replay_port !== undefined) {
    const { kv_events_port: pub, kv_events_replay_port: replay, data_parallel_size: n } = cfg.kubernetes;
    // Rank r uses both ports + r (vLLM's offset_endpoint_port): the two runs must not meet.
    if (Math.abs(pub - replay) < n)
      problems.push(
        n === 1
          ? '  kubernetes.kv_events_replay_port: the same port as kv_events_port'
          : `  kubernetes.kv_events_replay_port: ranks use ports ${pub}–${pub + n - 1} and ${replay}–${replay + n - 1}, which overlap (data_parallel_size ${n})`,
      );
  }
  if (cfg.collector) problems.push(...checkCollectorSection(cfg.collector, 'collector'));
  if (problems.length > 0)
    throw new KinferenceError('KINF_ERR_CONFIG', `${source}: invalid configuration\n${problems.join('\n')}`);
}

export function parseFleetConfig(raw: unknown, source: string, baseDir: string): FleetConfig {
  const cfg = validateConfig(FleetConfigSchema, raw, source);
  checkFleet(cfg, source);
  for (const m of Object.values(cfg.models)) {
    m.tokenizer = resolveSpec(m.tokenizer, baseDir);
    m.chat_template = resolveSpec(m.chat_template, baseDir);
  }
  return cfg;
}

export function loadFleetConfig(path: string): FleetConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new KinferenceError('KINF_ERR_CONFIG_FILE', `${path}: cannot read: ${(e as Error).message}`, {
      cause: e,
    });
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (e) {
    throw new KinferenceError('KINF_ERR_CONFIG_FILE', `${path}: not valid YAML: ${(e as Error).message}`, {
      cause: e,
    });
  }
  return parseFleetConfig(raw, path, dirname(resolve(path)));
}

/** The model a request names: a base model, or the base model of a LoRA adapter. */
export function resolveModel(cfg: FleetConfig, name: string): { model: string; lora: string | null } | null {
  // Own keys only: a request naming "toString" is not a model of every fleet.
  if (Object.hasOwn(cfg.models, name)) return { model: name, lora: null };
  for (const [model, m] of Object.entries(cfg.models))
    if (m.lora_adapters?.includes(name)) return { model, lora: name };
  return null;
}
