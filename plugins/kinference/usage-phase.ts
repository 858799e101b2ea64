// Usage and cost in the plugin: the quote before forwarding, the usage record from the log phase (src/usage).
import {
  redisSentinelSettings,
  redisTlsSettings,
  type PluginConfig,
} from '../../src/config/plugin-config.js';
import type { Policies } from '../../src/policies/index.js';
import type { RouteOutcome } from '../../src/router/index.js';
import {
  UsageWriter,
  createUsageRedis,
  estimateCost,
  estimateOutputTokens,
  priceFor,
  tokenPrices,
  type CostEstimate,
  type HeaderMap,
  type OutputEstimate,
  type TokenPrices,
  type UsageEvent,
} from '../../src/usage/index.js';
import * as A from '../../src/telemetry/attributes.js';
import type { RouteSpan } from '../../src/telemetry/index.js';
import { predictedCachedTokens } from '../../src/plugin-metrics/index.js';
import { logOnce } from './log-once.js';

/** The response header quoting a request's predicted cost before it is forwarded. */
export const COST_HEADER = 'x-kinference-cost-estimate';

export interface UsageDeps {
  policies: Policies;
  writer: Pick<UsageWriter, 'record'>;
}

/** One writer (one Redis connection) per Redis, prefix and retention: shared by every config naming them. */
const writers = new Map<string, UsageWriter>();

/**
 * The usage recorder of a config: null without a policies section (then nothing here runs), or when its
 * Redis client cannot be built (an unreadable TLS file: said once; routing goes on without usage records).
 */
export function usageDeps(config: PluginConfig): UsageDeps | null {
  try {
    return buildUsageDeps(config);
  } catch (e) {
    logOnce('usage:config', `usage records off for this config, routing goes on: ${String(e)}`);
    return null;
  }
}

function buildUsageDeps(config: PluginConfig): UsageDeps | null {
  const policies = config.policies;
  if (!policies) return null;
  const redis = {
    url: config.redis_url,
    cluster: config.redis_cluster,
    ...(config.redis_cluster_nodes ? { clusterNodes: config.redis_cluster_nodes } : {}),
    ...(redisTlsSettings(config) ? { tls: redisTlsSettings(config)! } : {}),
    ...(redisSentinelSettings(config) ? { sentinel: redisSentinelSettings(config)! } : {}),
  };
  const key = JSON.stringify([redis, config.redis_key_prefix, policies.usage_retention_days]);
  let writer = writers.get(key);
  if (!writer) {
    writer = new UsageWriter(createUsageRedis(redis), {
      keyPrefix: config.redis_key_prefix,
      retentionDays: policies.usage_retention_days,
      cluster: config.redis_cluster,
    });
    writers.set(key, writer);
  }
  return { policies, writer };
}

/** The outcome's tenant (router, policies/tenant.ts); a request routed before parse is the default tenant. */
export function tenantOf(outcome: RouteOutcome, p: Policies): { name: string; serviceClass: string } {
  const t = outcome.tenant;
  return t
    ? { name: t.name, serviceClass: t.serviceClass.name }
    : { name: p.default_tenant, serviceClass: p.default_class };
}

/** Prompt tokens the chosen pod serves from its cache (one rule for usage records and decision metrics). */
export { predictedCachedTokens };

/** The per-token prices of the request's model on the chosen pod (its speeds for a GPU-hour price). */
export function pricesOf(outcome: RouteOutcome, p: Policies): TokenPrices | null {
  const price = priceFor(p.prices, outcome.model);
  if (!price) return null;
  const c = outcome.decision.chosen;
  const speeds = c?.speeds ? { ...c.speeds, running: c.running } : null;
  return tokenPrices(price, speeds);
}

/** Output tokens reserved at admission: max_tokens, or the configured default. */
export function reservedOutputTokens(outcome: RouteOutcome, p: Policies): number {
  return outcome.maxTokens ?? p.default_output_tokens;
}

/**
 * The predicted cost of a request as routed: its prompt, the chosen pod's predicted cached tokens and the
 * reserved output (an upper bound when the answer stops early). Null without a price for the model.
 */
export function quoteCost(outcome: RouteOutcome, p: Policies): CostEstimate | null {
  const prices = pricesOf(outcome, p);
  if (!prices) return null;
  return estimateCost(
    {
      promptTokens: outcome.promptTokens,
      cachedTokens: predictedCachedTokens(outcome),
      outputTokens: reservedOutputTokens(outcome, p),
    },
    prices,
  );
}

/** `<amount> <currency>`, 6 significant digits: the header's value, or null when not quoted. */
export function costHeaderValue(outcome: RouteOutcome, p: Policies): string | null {
  if (!p.quote_cost || outcome.target === null) return null;
  const q = quoteCost(outcome, p);
  return q?.cost == null ? null : `${Number(q.cost.toPrecision(6))} ${p.currency}`;
}

/** Whether the request's usage is recorded: routed to a pod of a known model, or shed (bounded models). */
const recorded = (o: RouteOutcome): boolean => o.model !== null && (o.target !== null || o.shed !== null);

/** The fields of kong.log.serialize() the usage record reads. */
export interface SerializedResponse {
  response?: { status?: number; size?: number; headers?: HeaderMap };
  latencies?: { proxy?: number };
}

/** What the log phase knows of one request, as its usage record. */
export function usageEvent(
  outcome: RouteOutcome,
  s: SerializedResponse,
  p: Policies,
  nowMs: number,
): UsageEvent & { prices: TokenPrices | null } {
  const { name, serviceClass } = tenantOf(outcome, p);
  const status = s.response?.status ?? 0;
  const headers = s.response?.headers ?? {};
  const output: OutputEstimate | null =
    typeof s.response?.size === 'number'
      ? estimateOutputTokens({
          status,
          bytesSent: s.response.size,
          headers,
          model: outcome.lora ?? outcome.model ?? '',
        })
      : null;
  const cachedTokens = predictedCachedTokens(outcome);
  const prices = pricesOf(outcome, p);
  const cost: CostEstimate =
    prices && output
      ? estimateCost(
          { promptTokens: outcome.promptTokens, cachedTokens, outputTokens: output.tokens },
          prices,
        )
      : {
          cost: null,
          saving: prices
            ? estimateCost({ promptTokens: outcome.promptTokens, cachedTokens, outputTokens: 0 }, prices)
                .saving
            : null,
        };
  const proxy = s.latencies?.proxy;
  const ttftMs = output?.streamed && status === 200 && typeof proxy === 'number' && proxy >= 0 ? proxy : null;
  return {
    atMs: nowMs,
    tenant: name,
    serviceClass,
    model: outcome.model!,
    shed: false,
    promptTokens: outcome.promptTokens,
    cachedTokens,
    output,
    ttftMs,
    cost,
    prices,
  };
}

function write(deps: UsageDeps, e: UsageEvent): void {
  deps.writer.record(e).then(
    (own) => {
      if (!own)
        logOnce(
          'usage:overflow',
          `usage: more tenants this hour than the cap; tenant ${e.tenant} and later ones are counted as (overflow)`,
        );
    },
    (err: unknown) =>
      logOnce('usage:write', `usage record not written (counts for this request lost): ${String(err)}`),
  );
}

/** The log phase's record (not awaited: the log phase returns while Redis answers). Returns the event. */
export function recordUsage(
  deps: UsageDeps,
  outcome: RouteOutcome,
  s: SerializedResponse,
  nowMs: number,
): UsageEvent | null {
  if (!recorded(outcome) || outcome.shed) return null;
  const e = usageEvent(outcome, s, deps.policies, nowMs);
  write(deps, e);
  return e;
}

/** A request refused before forwarding (429): counted as shed, with no tokens. */
export function recordShed(deps: UsageDeps, outcome: RouteOutcome, nowMs: number): void {
  if (!recorded(outcome)) return;
  const { name, serviceClass } = tenantOf(outcome, deps.policies);
  write(deps, {
    atMs: nowMs,
    tenant: name,
    serviceClass,
    model: outcome.model!,
    shed: true,
    promptTokens: outcome.promptTokens,
    cachedTokens: 0,
    output: { tokens: 0, exact: true, streamed: false },
    ttftMs: null,
    cost: { cost: 0, saving: 0 },
  });
}

/**
 * The access phase's quote: the predicted cost for the x-kinference-cost-estimate response header (only with
 * quote_cost and a price; the access phase sends it with the limit headers in one set_headers), and on the
 * decision span with the cached tokens it prices.
 */
export function quoteHeaders(
  deps: UsageDeps,
  outcome: RouteOutcome,
  span: Pick<RouteSpan, 'setAttributes'> | null,
): Record<string, string> {
  if (outcome.target === null) return {};
  const p = deps.policies;
  const q = quoteCost(outcome, p);
  if (span) {
    const attrs: Record<string, number | string> = {
      [A.ATTR_KINFERENCE_USAGE_CACHED_TOKENS]: predictedCachedTokens(outcome),
    };
    if (q?.cost != null) {
      attrs[A.ATTR_KINFERENCE_COST_PREDICTED] = Number(q.cost.toPrecision(6));
      attrs[A.ATTR_KINFERENCE_COST_CURRENCY] = p.currency;
    }
    span.setAttributes(attrs);
  }
  const value = costHeaderValue(outcome, p);
  return value === null ? {} : { [COST_HEADER]: value };
}

/** The log phase's span attributes of a usage record: output tokens (and whether estimated), the cost. */
export function usageSpanAttributes(e: UsageEvent): Record<string, number | boolean> {
  const out: Record<string, number | boolean> = {};
  if (e.output) {
    out[A.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS] = e.output.tokens;
    out[A.ATTR_KINFERENCE_USAGE_OUTPUT_ESTIMATED] = !e.output.exact;
  }
  if (e.cost.cost !== null) out[A.ATTR_KINFERENCE_COST_ESTIMATED] = Number(e.cost.cost.toPrecision(6));
  return out;
}
