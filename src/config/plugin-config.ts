// The plugin configuration's one source: TypeBox schema, cross-field problems, derived settings.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { PoliciesSchema, policyProblems } from '../policies/index.js';

/**
 * The plugin configuration: the ONE source for the TypeScript type, schemas/plugin-config.schema.json and
 * the Kong schema (to-kong-schema.ts). Every field carries a description of 10–500 characters (Kong's rule),
 * and a default unless it is optional. `x-kong` holds Kong-only attributes. Unknown fields are rejected, as
 * Kong rejects them (see pluginConfigFromKong for the keys Kong itself adds at run time).
 */

const TOKENIZER_PATTERN = '^(tiktoken:[a-z0-9_]+|hf:[^\\n\\r]+)$';
/** host:port; the port's range is checked by pluginConfigProblems (Lua patterns cannot say 1–65535). */
const HOST_PORT_PATTERN = '^[^: \\t\\n\\v\\f\\r]+:[0-9]{1,5}$';
const TEMPLATE_PATTERN = '^(chatml|harmony|llama3|none|hf:[^\\n\\r]+)$';
/** A pattern field's `x-expected`: what it takes, in words, for every error about it (config/validate.ts). */
const HOST_PORT_WORDS = 'host:port (e.g. 10.0.0.7:8000; port 1–65535)';

export const PluginConfigSchema = Type.Object(
  {
    redis_url: Type.String({
      default: 'redis://127.0.0.1:6379/0',
      pattern: '^rediss?://',
      'x-expected': 'a Redis URL: redis://[user:password@]host:port/db, or rediss://… for TLS',
      description:
        'Redis holding the KV-location index, as redis://[user:password@]host:port/db, or rediss:// for TLS.',
      'x-kong': { referenceable: true, encrypted: true },
    }),
    redis_cluster: Type.Boolean({
      default: false,
      description:
        'redis_url names one node of a Redis Cluster (any node; the others are found from it). Each model keeps its whole index in one slot, so one shard.',
    }),
    redis_cluster_nodes: Type.Optional(
      Type.Array(Type.String({ pattern: HOST_PORT_PATTERN, 'x-expected': HOST_PORT_WORDS }), {
        maxItems: 64,
        description:
          'With redis_cluster: more nodes of the Redis Cluster to start from, as host:port, when the node of redis_url does not answer. User, password and TLS come from redis_url.',
      }),
    ),
    redis_sentinels: Type.Optional(
      Type.Array(Type.String({ pattern: HOST_PORT_PATTERN, 'x-expected': HOST_PORT_WORDS }), {
        minItems: 1,
        maxItems: 64,
        description:
          'Redis Sentinel: sentinels to ask for the primary of redis_sentinel_master, as host:port; failovers are followed. redis_url then gives only user, password, database and TLS of the data nodes.',
      }),
    ),
    redis_sentinel_master: Type.Optional(
      Type.String({
        pattern: '^[^ \\t\\n\\v\\f\\r]+$',
        'x-expected': 'the master name the sentinels monitor (sentinel monitor <name> ...)',
        description:
          'With redis_sentinels: the name the sentinels monitor the primary under (sentinel monitor <name> host port quorum).',
      }),
    ),
    redis_sentinel_password: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'With redis_sentinels: the password of the sentinels themselves (their requirepass), when they have one; the data nodes take theirs from redis_url.',
        'x-kong': { referenceable: true, encrypted: true },
      }),
    ),
    redis_sentinel_tls: Type.Optional(
      Type.Boolean({
        description:
          'With redis_sentinels: the sentinels speak TLS, with the redis_tls_* settings of the data nodes. Unset: as redis_url (rediss:// or not).',
      }),
    ),
    redis_tls_ca_file: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'With rediss://: path of a PEM file of the CA certificates that sign the Redis server certificate (an in-cluster Redis with its own CA), trusted in place of the system CAs. Read when the connection is made.',
      }),
    ),
    redis_tls_cert_file: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'With rediss://: path of a PEM client certificate, for a Redis that requires one (tls-auth-clients). Needs redis_tls_key_file.',
      }),
    ),
    redis_tls_key_file: Type.Optional(
      Type.String({
        minLength: 1,
        description: 'With rediss://: path of the PEM private key of redis_tls_cert_file.',
      }),
    ),
    redis_tls_servername: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'With rediss://: the name the Redis server certificate must carry, sent as TLS SNI and checked, when it is not the host of redis_url (an IP address, another DNS name).',
      }),
    ),
    redis_timeout_ms: Type.Integer({
      default: 25,
      minimum: 1,
      maximum: 10000,
      description:
        'Budget for the one index lookup per request, in milliseconds; past it the request is routed on load alone.',
    }),
    redis_key_prefix: Type.String({
      default: 'kinf',
      pattern: '^[A-Za-z0-9_.:-]{1,64}$',
      'x-expected': '1–64 characters among letters, digits and _ . : -',
      description: 'Prefix of every Redis key of the index; the collector must use the same prefix.',
    }),
    index: Type.Union([Type.Literal('redis'), Type.Literal('memory')], {
      default: 'redis',
      description:
        'Where the KV-location index lives: redis (shared with the collector) or memory (tests and single-node demos only).',
    }),
    model_pods: Type.Optional(
      Type.Record(
        Type.String(),
        Type.Array(Type.String({ pattern: HOST_PORT_PATTERN, 'x-expected': HOST_PORT_WORDS })),
        {
          description:
            'Static fallback pod list per model (model name to host:port list), used when the index has no pods for the model.',
        },
      ),
    ),
    lora_adapters: Type.Optional(
      Type.Record(Type.String(), Type.String({ minLength: 1 }), {
        description:
          'LoRA adapters served by the pods, as adapter name to base model. A request naming an adapter is routed among the base model pods.',
      }),
    ),
    tokenizer: Type.String({
      default: 'tiktoken:o200k_harmony',
      pattern: TOKENIZER_PATTERN,
      'x-expected':
        'a tokenizer spec: tiktoken:<encoding> (o200k_harmony, o200k_base, cl100k_base) or hf:<path to tokenizer.json, model directory or Hugging Face model id such as Qwen/Qwen3-8B>',
      description:
        'Tokenizer matching the served model: tiktoken:<encoding>, or hf:<path to tokenizer.json or model directory> or hf:<Hugging Face model id> (e.g. hf:Qwen/Qwen3-8B, read from the local Hugging Face cache). Must match vLLM or nothing is ever cached. The default fits gpt-oss.',
    }),
    chat_template: Type.String({
      default: 'harmony',
      pattern: TEMPLATE_PATTERN,
      'x-expected':
        'a chat template: chatml, harmony, llama3, none, or hf:<path to tokenizer_config.json or .jinja, model directory or Hugging Face model id such as Qwen/Qwen3-8B>',
      description:
        'Chat template matching the served model: chatml, harmony, llama3, none, or hf:<path to tokenizer_config.json or model directory> or hf:<Hugging Face model id> (from the local Hugging Face cache). The default fits gpt-oss.',
    }),
    default_chat_template_kwargs: Type.Optional(
      Type.String({
        minLength: 2,
        description:
          'The JSON object given to vLLM as --default-chat-template-kwargs (e.g. {"enable_thinking": false}), if any: the template gets it under the request\'s own chat_template_kwargs, as vLLM renders. Only for hf: templates.',
      }),
    ),
    block_size: Type.Integer({
      default: 16,
      minimum: 1,
      maximum: 4096,
      description: 'Tokens per KV-cache block, as vLLM is configured (--block-size, 16 by default).',
    }),
    max_prompt_tokens: Type.Integer({
      default: 131072,
      minimum: 16,
      maximum: 4194304,
      description:
        'Cap on tokenization work per request; longer prompts are routed on their first max_prompt_tokens tokens.',
    }),
    max_model_len: Type.Optional(
      Type.Record(Type.String(), Type.Integer({ minimum: 16, maximum: 4194304 }), {
        description:
          "Context window per model in tokens, as vLLM serves it (--max-model-len): a longer prompt is never tokenized past it and is routed on load alone (context_window_exceeded), since vLLM refuses it. Wins over the pods' own: for a model not listed, the smallest max_model_len its healthy pods report in /v1/models (read by the collector) as the router's last lookup found it, else none (cut at max_prompt_tokens).",
      }),
    ),
    max_template_messages: Type.Integer({
      default: 2048,
      minimum: 1,
      maximum: 100000,
      description:
        'Messages a chat template renders at most per request (~40-100 us of CPU each with an hf: template); a request with more is routed on load alone (template_budget_exceeded).',
    }),
    max_template_depth: Type.Integer({
      default: 64,
      minimum: 4,
      maximum: 1024,
      description:
        'Nesting depth of the JSON the chat template renders (tools, tool call arguments, content parts) at most; a deeper request is routed on load alone (template_budget_exceeded).',
    }),
    decision_budget_ms: Type.Integer({
      default: 500,
      minimum: 10,
      maximum: 60000,
      description:
        "Time a decision's template, tokenization and keys may take, ms; past it the request is routed on load alone (decision_budget_exceeded). With decision workers the event loop stops waiting at the budget.",
    }),
    decision_workers: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 256,
        description:
          "Worker threads of the plugin server that render templates, tokenize and hash keys, shared by every config of the process (the first config's setting sizes the pool). Unset: the cores available (os.availableParallelism()). 0: on the event loop.",
      }),
    ),
    max_body_bytes: Type.Integer({
      default: 8388608,
      minimum: 1024,
      maximum: 268435456,
      description:
        "Bodies larger than this (by Content-Length) are never fetched by the plugin (the RPC cost grows with size); Kong's target (the service url) is kept. Chunked, compressed and empty bodies are not read either.",
    }),
    fallback: Type.Union([Type.Literal('least-loaded'), Type.Literal('kong-default')], {
      default: 'least-loaded',
      description:
        'What happens when no prediction can be made or no pod is healthy: least-loaded picks the pod with the least work, kong-default leaves the service target.',
    }),
    stale_after_ms: Type.Integer({
      default: 10000,
      minimum: 100,
      maximum: 3600000,
      description:
        'Pod index data older than this (no KV event and no scrape) is stale: its cached-prefix credit is discounted.',
    }),
    reservation_ttl_ms: Type.Integer({
      default: 15000,
      minimum: 0,
      maximum: 600000,
      description:
        "How long the router counts its own recent assignments as queued work on a pod, until the pod's metrics show them, and their prompts as about to be cached there, until the pod's KV events do. 0 turns both off.",
    }),
    kv_reuse_reports_ms: Type.Integer({
      default: 600000,
      minimum: 0,
      maximum: 86400000,
      description:
        "For this long after the collector rebuilt a pod's index without its whole event history (a restart, takeover, Redis data loss), the router credits the pod with prompts it sent there before (its own memory), and requests to the pod ask vLLM to report the cached blocks they reuse (vllm_xargs.kv_cache_report_mode=full, vLLM #45261), so those blocks return to the index. Bodies with their own vllm_xargs are left alone. 0 turns it off.",
    }),
    share_reservations: Type.Boolean({
      default: true,
      description:
        "Share this node's reservations (its recent assignments, see reservation_ttl_ms) with the other Kong nodes through the Redis index, and count theirs: nodes then see each other's work in flight. One small Redis write per routed request and one read beside each lookup.",
    }),
    shed_ttft_slo_ms: Type.Integer({
      default: 0,
      minimum: 0,
      maximum: 3600000,
      description:
        'Opt-in load shedding: when every pod is predicted over this TTFT because of its queue (or, with itl_slo_ms, over the ITL guard), answer 429 with Retry-After. 0 disables shedding.',
    }),
    itl_slo_ms: Type.Integer({
      default: 0,
      minimum: 0,
      maximum: 60000,
      description:
        "Opt-in ITL guard: a pod is not given more prefill work than keeps its decoding requests' inter-token latency under this bound (ms); with shed_ttft_slo_ms set, a request no pod can take is answered 429. 0 disables.",
    }),
    itl_response_tokens: Type.Integer({
      default: 256,
      minimum: 1,
      maximum: 1024,
      description:
        'ITL guard: output tokens of a typical answer, for requests without max_tokens. The guard keeps the ITL averaged over an answer this long within the bound.',
    }),
    itl_decode_base_ms: Type.Number({
      default: 43,
      minimum: 0,
      maximum: 10000,
      description:
        'ITL guard model: a decode step of the served model with no context (weights read, scheduling, sampling), ms. The default fits a ~27B FP8 model on an L40S. With itl_decode_from_metrics, used only for a pod the collector has not measured yet, and as the shape to scale through a single measured step.',
    }),
    itl_decode_ms_per_1k_context: Type.Number({
      default: 0.36,
      minimum: 0,
      maximum: 1000,
      description:
        'ITL guard model: time a decode step gains per 1,000 context tokens decoding on the pod (KV read), ms. The default fits a ~27B model with 256 KiB of KV per token on an L40S. With itl_decode_from_metrics, a fallback as itl_decode_base_ms is.',
    }),
    itl_decode_from_metrics: Type.Boolean({
      default: true,
      description:
        "ITL guard: use each pod's decode step as the collector measures it from vLLM's /metrics (decode-only scrape intervals) in place of itl_decode_base_ms and itl_decode_ms_per_1k_context, once it has. Off: the configured model everywhere.",
    }),
    latency_feedback: Type.Boolean({
      default: false,
      description:
        "Correct each pod's predictions from Kong's measured time to the upstream's first byte. Only when pods send response headers with the first token; vLLM sends them at once, so leave off for vLLM.",
    }),
    expose_headers: Type.Boolean({
      default: false,
      description:
        'Add x-kinference-* headers (chosen pod, predicted TTFT, cached tokens) to the upstream request, for debugging.',
    }),
    otlp_endpoint: Type.Optional(
      Type.String({
        pattern: '^https?://',
        'x-expected': 'an http:// or https:// URL',
        description:
          'OTLP/HTTP traces endpoint, e.g. http://jaeger:4318/v1/traces. Unset disables tracing at no cost per request.',
      }),
    ),
    service_name: Type.String({
      default: 'kinference',
      minLength: 1,
      description: 'OpenTelemetry service.name of the spans the plugin exports.',
    }),
    trace_sample_ratio: Type.Number({
      default: 1,
      minimum: 0,
      maximum: 1,
      description:
        'Fraction of requests without a traceparent whose decision span is exported; a request with one follows its sampled flag (parent-based sampling).',
    }),
    policies: Type.Optional(PoliciesSchema),
  },
  { additionalProperties: false, $id: 'https://kinference.dev/schemas/plugin-config.schema.json' },
);

export type PluginConfig = Static<typeof PluginConfigSchema>;

/**
 * The rules that span fields (Kong checks one field at a time): each problem as "field: what is wrong".
 * The plugin disables itself on any (requests pass through); a fleet file with any is refused at load.
 */
export function pluginConfigProblems(
  c: Pick<PluginConfig, 'redis_cluster' | 'redis_cluster_nodes'> &
    Partial<Pick<PluginConfig, 'model_pods' | 'lora_adapters' | 'default_chat_template_kwargs'>> &
    Partial<Pick<PluginConfig, 'redis_url' | RedisTlsField | RedisSentinelField | 'policies'>>,
): string[] {
  const problems: string[] = [...policyProblems(c.policies)];
  const tlsSet = REDIS_TLS_FIELDS.filter((f) => c[f] !== undefined);
  if (tlsSet.length > 0 && c.redis_url !== undefined && !c.redis_url.startsWith('rediss://'))
    problems.push(
      `${tlsSet.join(', ')}: set, but redis_url is not rediss:// (plain TCP): use rediss:// for TLS, or drop them`,
    );
  if ((c.redis_tls_cert_file === undefined) !== (c.redis_tls_key_file === undefined))
    problems.push(
      'redis_tls_cert_file, redis_tls_key_file: a client certificate needs its key, and a key its certificate',
    );
  const kwargs = templateKwargsProblem(c.default_chat_template_kwargs);
  if (kwargs) problems.push(`default_chat_template_kwargs: ${kwargs}`);
  if (c.redis_cluster_nodes?.length && !c.redis_cluster)
    problems.push(
      'redis_cluster_nodes: set, but redis_cluster is not (set redis_cluster: true for a Redis Cluster, or drop redis_cluster_nodes)',
    );
  problems.push(...sentinelProblems(c));
  // The schema's pattern takes 1–5 digits (Kong's Lua patterns have no alternation to say 1–65535).
  const badPort = (address: string): boolean => {
    const port = Number(address.slice(address.lastIndexOf(':') + 1));
    return !(port >= 1 && port <= 65535);
  };
  c.redis_cluster_nodes?.forEach((a, i) => {
    if (badPort(a)) problems.push(`redis_cluster_nodes.${i}: ${a}: the port must be 1–65535`);
  });
  c.redis_sentinels?.forEach((a, i) => {
    if (badPort(a)) problems.push(`redis_sentinels.${i}: ${a}: the port must be 1–65535`);
  });
  // Kong refuses an empty string, map keys included; TypeBox's Record cannot say so for keys.
  if (Object.hasOwn(c.model_pods ?? {}, '')) problems.push('model_pods: a model name is empty');
  if (Object.hasOwn(c.lora_adapters ?? {}, '')) problems.push('lora_adapters: an adapter name is empty');
  for (const [model, pods] of Object.entries(c.model_pods ?? {}))
    pods.forEach((a, i) => {
      if (badPort(a)) problems.push(`model_pods.${model}.${i}: ${a}: the port must be 1–65535`);
    });
  return problems;
}

const REDIS_SENTINEL_FIELDS = [
  'redis_sentinels',
  'redis_sentinel_master',
  'redis_sentinel_password',
  'redis_sentinel_tls',
] as const;
type RedisSentinelField = (typeof REDIS_SENTINEL_FIELDS)[number];

/** Sentinel's cross-field rules: a master name with the sentinels, no Cluster, no sentinel option alone. */
function sentinelProblems(
  c: Partial<Pick<PluginConfig, RedisSentinelField | 'redis_cluster' | 'redis_cluster_nodes'>>,
): string[] {
  const problems: string[] = [];
  const sentinels = (c.redis_sentinels?.length ?? 0) > 0;
  if (sentinels && c.redis_cluster)
    problems.push(
      'redis_sentinels: set together with redis_cluster: a Redis Cluster fails over by itself (drop redis_sentinels), or Sentinel watches a standalone primary (unset redis_cluster)',
    );
  if (sentinels && c.redis_sentinel_master === undefined)
    problems.push(
      'redis_sentinel_master: required with redis_sentinels: the name the sentinels monitor the primary under (sentinel monitor <name> …)',
    );
  if (!sentinels) {
    const alone = REDIS_SENTINEL_FIELDS.filter((f) => f !== 'redis_sentinels' && c[f] !== undefined);
    if (alone.length > 0)
      problems.push(
        `${alone.join(', ')}: set, but redis_sentinels is not (list the sentinels as host:port, or drop them)`,
      );
  }
  return problems;
}

/**
 * The Sentinel settings of the Redis connection, as redis-connection.ts takes them; undefined without
 * redis_sentinels.
 */
export function redisSentinelSettings(
  c: Partial<Pick<PluginConfig, RedisSentinelField>>,
): { nodes: string[]; master: string; password?: string; tls?: boolean } | undefined {
  if (!c.redis_sentinels?.length) return undefined;
  return {
    nodes: c.redis_sentinels,
    // Checked by pluginConfigProblems; the connection refuses an empty name too.
    master: c.redis_sentinel_master ?? '',
    ...(c.redis_sentinel_password !== undefined ? { password: c.redis_sentinel_password } : {}),
    ...(c.redis_sentinel_tls !== undefined ? { tls: c.redis_sentinel_tls } : {}),
  };
}

const REDIS_TLS_FIELDS = [
  'redis_tls_ca_file',
  'redis_tls_cert_file',
  'redis_tls_key_file',
  'redis_tls_servername',
] as const;
type RedisTlsField = (typeof REDIS_TLS_FIELDS)[number];

/**
 * The TLS settings of the Redis connection, as redis-connection.ts takes them (option names kept for its
 * errors); undefined when none is set.
 */
export function redisTlsSettings(
  c: Partial<Pick<PluginConfig, RedisTlsField>>,
): { caFile?: string; certFile?: string; keyFile?: string; servername?: string } | undefined {
  if (REDIS_TLS_FIELDS.every((f) => c[f] === undefined)) return undefined;
  return {
    ...(c.redis_tls_ca_file !== undefined ? { caFile: c.redis_tls_ca_file } : {}),
    ...(c.redis_tls_cert_file !== undefined ? { certFile: c.redis_tls_cert_file } : {}),
    ...(c.redis_tls_key_file !== undefined ? { keyFile: c.redis_tls_key_file } : {}),
    ...(c.redis_tls_servername !== undefined ? { servername: c.redis_tls_servername } : {}),
  };
}

/** A default_chat_template_kwargs value read once: the object it holds, or why it is not a JSON object. */
function readTemplateKwargs(json: string): { kwargs: Record<string, unknown> } | { problem: string } {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (e) {
    return { problem: `not JSON (${(e as Error).message})` };
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? { kwargs: v as Record<string, unknown> }
    : {
        problem: `must be a JSON object, as vLLM's --default-chat-template-kwargs (got ${json.slice(0, 80)})`,
      };
}

/** Why a default_chat_template_kwargs value is not a JSON object, or null when it is (or unset). */
export function templateKwargsProblem(json: string | undefined): string | null {
  if (json === undefined) return null;
  const r = readTemplateKwargs(json);
  return 'problem' in r ? r.problem : null;
}

/** default_chat_template_kwargs as the object it holds (checked by pluginConfigProblems), or undefined. */
export function defaultTemplateKwargs(json: string | undefined): Record<string, unknown> | undefined {
  if (json === undefined) return undefined;
  const r = readTemplateKwargs(json);
  return 'kwargs' in r ? r.kwargs : undefined;
}

/**
 * The plugin's own fields out of the config Kong hands an external plugin. Kong has already rejected
 * unknown fields against the plugin schema when the config was written (Admin API, decK, DB-less load); what
 * it sends to StartInstance adds its own keys (route_id, service_id, consumer_id, plugin_instance_name,
 * __plugin_id, __key__, __seq__, … depending on the version), which are not configuration and must not make
 * the strict validation disable the plugin.
 */
export function pluginConfigFromKong(raw: unknown): unknown {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) if (k in PluginConfigSchema.properties) out[k] = v;
  return out;
}

export type FieldSchema = TSchema & { description?: string; default?: unknown };
