// The `policies` section of the plugin config: tenants, service classes, token limits, prices (one source).
import { Type, type Static } from '@sinclair/typebox';

/**
 * Tenants and policies (docs/policies.md). Absent from the plugin config, nothing here runs and routing is
 * exactly what it was (no PDK call, no Redis key). The TypeBox schema is the one source of the TypeScript
 * types, the JSON Schema and Kong's schema, as for every plugin field (config/plugin-config.ts).
 */

const STRICT = { additionalProperties: false } as const;
const NAME_PATTERN = '^[A-Za-z0-9_.@:-]{1,128}$';
const NAME_WORDS = '1–128 characters among letters, digits and _ . @ : -';
const name = (description: string, dflt?: string): ReturnType<typeof Type.String> =>
  Type.String({
    pattern: NAME_PATTERN,
    'x-expected': NAME_WORDS,
    description,
    ...(dflt !== undefined ? { default: dflt } : {}),
  });

export const TENANT_SOURCES = ['consumer', 'consumer_group', 'header', 'user'] as const;
export type TenantSource = (typeof TENANT_SOURCES)[number];

export const ServiceClassSchema = Type.Object(
  {
    name: name('The class name, as tenants[].class and default_class name it (e.g. interactive, batch).'),
    priority: Type.Integer({
      minimum: -1000,
      maximum: 1000,
      description:
        'Higher is served first, strictly between priorities. Negative: sheddable under overload (Gateway API Inference Extension). Zero or more: never shed for overload.',
    }),
    ttft_objective_ms: Type.Integer({
      minimum: 1,
      maximum: 3600000,
      description:
        'The TTFT this class is promised (ms). A lower class is not placed where it would push this class past it; a sheddable class is not placed where it would miss it itself (it waits, then is shed).',
    }),
    max_wait_ms: Type.Integer({
      default: 0,
      minimum: 0,
      maximum: 60000,
      description:
        'How long a request of this class may wait in the gateway for capacity under overload before it is shed (sheddable classes) or sent to its best pod anyway (others). 0: no wait.',
    }),
    reserved_pods: Type.Integer({
      default: 0,
      minimum: 0,
      maximum: 64,
      description:
        'Pods kept ready for this class from the start, before it is first served and while it is idle: a lower class is not placed there where it would push this class past its objective. The same pods on every Kong node (a hash of their ids). 0: protected only where served recently.',
    }),
  },
  STRICT,
);
export type ServiceClass = Static<typeof ServiceClassSchema>;

const matchFields = {
  consumer: Type.Optional(
    Type.String({
      minLength: 1,
      description: 'The Kong consumer, by username, custom_id or id.',
    }),
  ),
  consumer_group: Type.Optional(
    Type.String({ minLength: 1, description: 'A consumer group the Kong consumer belongs to, by name.' }),
  ),
  tenant: Type.Optional(
    Type.String({ minLength: 1, description: 'The resolved tenant name, whatever source named it.' }),
  ),
};

export const TenantMatchSchema = Type.Object(matchFields, {
  ...STRICT,
  description: 'Which requests a tenant policy applies to: every field given must match.',
});

export const LimitMatchSchema = Type.Object(
  {
    ...matchFields,
    model: Type.Optional(
      Type.String({
        minLength: 1,
        description: 'The model of the request (the base model of a LoRA adapter).',
      }),
    ),
  },
  {
    ...STRICT,
    description: 'Which requests a rate-limit policy counts: every field given must match; {} is all.',
  },
);
export type LimitMatch = Static<typeof LimitMatchSchema>;

export const TenantPolicySchema = Type.Object(
  {
    match: TenantMatchSchema,
    class: Type.Optional(name('The service class of the matched tenants (a classes[].name).')),
    max_concurrent: Type.Integer({
      default: 0,
      minimum: 0,
      maximum: 1000000,
      description: 'Requests of one matched tenant in flight at once, over every Kong node. 0: no cap.',
    }),
    daily_budget: Type.Number({
      default: 0,
      minimum: 0,
      maximum: 1e12,
      description:
        'Estimated cost one matched tenant may spend per UTC day, in `currency` (needs prices). 0: no budget.',
    }),
  },
  STRICT,
);
export type TenantPolicy = Static<typeof TenantPolicySchema>;

export const TOKEN_KINDS = ['prompt', 'output', 'total'] as const;
export const WINDOWS = ['minute', 'hour', 'day'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];
export type LimitWindow = (typeof WINDOWS)[number];

export const TokenLimitSchema = Type.Object(
  {
    tokens: Type.Union(
      TOKEN_KINDS.map((k) => Type.Literal(k)),
      {
        description:
          'What is counted: prompt tokens (exact at admission), output tokens (reserved from max_tokens, settled at the end) or their total.',
      },
    ),
    window: Type.Union(
      WINDOWS.map((w) => Type.Literal(w)),
      { description: 'The fixed window the limit counts over (UTC minute, hour or day).' },
    ),
    limit: Type.Integer({ minimum: 1, maximum: 1e15, description: 'Tokens allowed per window.' }),
  },
  STRICT,
);
export type TokenLimit = Static<typeof TokenLimitSchema>;

export const RateLimitPolicySchema = Type.Object(
  {
    match: LimitMatchSchema,
    per: Type.Union([Type.Literal('tenant'), Type.Literal('all')], {
      default: 'tenant',
      description: 'tenant: each matched tenant has its own counters; all: the matched requests share one.',
    }),
    limits: Type.Array(TokenLimitSchema, {
      minItems: 1,
      maxItems: 9,
      description: 'The token limits of this policy; a request must fit every one of them.',
    }),
  },
  STRICT,
);
export type RateLimitPolicy = Static<typeof RateLimitPolicySchema>;

export const PriceSchema = Type.Object(
  {
    input_per_million: Type.Optional(
      Type.Number({ minimum: 0, maximum: 1e9, description: 'Price of 1M uncached prompt tokens.' }),
    ),
    cached_input_per_million: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: 1e9,
        description: 'Price of 1M prompt tokens served from the KV cache (cache read).',
      }),
    ),
    output_per_million: Type.Optional(
      Type.Number({ minimum: 0, maximum: 1e9, description: 'Price of 1M output tokens.' }),
    ),
    gpu_hour: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: 1e6,
        description:
          "Price of one GPU-hour; per-token prices are derived from the pods' measured prefill and decode speeds where not given.",
      }),
    ),
    gpus_per_pod: Type.Integer({
      default: 1,
      minimum: 1,
      maximum: 1024,
      description: 'GPUs behind one pod (tensor and pipeline parallel), for gpu_hour.',
    }),
  },
  STRICT,
);
export type Price = Static<typeof PriceSchema>;

export const DEFAULT_CLASSES: ServiceClass[] = [
  { name: 'interactive', priority: 100, ttft_objective_ms: 1000, max_wait_ms: 0, reserved_pods: 0 },
  { name: 'standard', priority: 0, ttft_objective_ms: 5000, max_wait_ms: 0, reserved_pods: 0 },
  { name: 'batch', priority: -1, ttft_objective_ms: 60000, max_wait_ms: 5000, reserved_pods: 0 },
];

export const PoliciesSchema = Type.Object(
  {
    tenant_from: Type.Array(Type.Union(TENANT_SOURCES.map((s) => Type.Literal(s))), {
      default: ['consumer', 'consumer_group'],
      minItems: 1,
      maxItems: 4,
      description:
        "Where a request's tenant comes from, first that names one wins: consumer, consumer_group, header (tenant_header), user (the OpenAI user field).",
    }),
    tenant_header: Type.String({
      default: 'x-tenant-id',
      pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$",
      'x-expected': 'an HTTP header name',
      description:
        'The request header naming the tenant, when tenant_from has header. It never raises the class above what the consumer has.',
    }),
    default_tenant: name('The tenant of a request nothing names.', 'default'),
    classes: Type.Array(ServiceClassSchema, {
      default: DEFAULT_CLASSES,
      minItems: 1,
      maxItems: 16,
      description: 'The service classes, each with a priority and a TTFT objective.',
    }),
    default_class: name('The class of a tenant no policy gives one.', 'standard'),
    tenants: Type.Array(TenantPolicySchema, {
      default: [],
      maxItems: 10000,
      description:
        'Per tenant, consumer or consumer group: its class, concurrent-request cap and daily budget. The first policy that matches applies.',
    }),
    rate_limits: Type.Array(RateLimitPolicySchema, {
      default: [],
      maxItems: 1000,
      description:
        'Token rate limits shared by every Kong node through Redis: each a match and its limits; a request must fit every policy that matches.',
    }),
    default_output_tokens: Type.Integer({
      default: 256,
      minimum: 1,
      maximum: 1048576,
      description:
        'Output tokens reserved at admission for a request without max_tokens (settled when the answer ends).',
    }),
    on_redis_error: Type.Union([Type.Literal('allow'), Type.Literal('deny')], {
      default: 'allow',
      description:
        'Limits, caps and budgets when Redis cannot be reached: allow (fail open, said once in the log) or deny (429).',
    }),
    prices: Type.Optional(
      Type.Record(Type.String(), PriceSchema, {
        description:
          'Prices per model (base model name, or * for any other): per million tokens, or a GPU-hour price.',
      }),
    ),
    currency: Type.String({
      default: 'USD',
      pattern: '^[A-Z]{3}$',
      'x-expected': 'an ISO 4217 currency code such as USD or EUR',
      description: 'The currency of prices and budgets.',
    }),
    quote_cost: Type.Boolean({
      default: true,
      description:
        'Send the predicted cost of each request in an x-kinference-cost-estimate response header (needs prices).',
    }),
    usage_retention_days: Type.Integer({
      default: 35,
      minimum: 1,
      maximum: 3660,
      description: 'How long the hourly usage records per tenant and model stay in Redis.',
    }),
  },
  {
    ...STRICT,
    description:
      'Tenants and policies: service classes, token rate limits, concurrency caps, budgets, prices and usage. Absent: every request alike, as before.',
  },
);

/** The policies section as the plugin holds it (defaults filled). */
export type Policies = Static<typeof PoliciesSchema>;
