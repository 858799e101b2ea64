// Maps one routing decision to its span attributes (every candidate's terms, the choice, the timings).
import type { Attributes } from '@opentelemetry/api';
import type { Decision } from '../core/choose.js';
import { NOT_READ_AS_CHAT, type FallbackReason } from '../core/fallback.js';
import type { RouteTimings } from '../router/stopwatch.js';
import { boundedDetail } from '../core/bounded-detail.js';
import * as A from './attributes.js';

/**
 * A routing decision as the span records it. The router's RouteOutcome satisfies this shape; telemetry keeps
 * its own structural type so it depends on core only at run time (RouteTimings is a type-only import).
 */
export interface DecisionRecord {
  target: { host: string; port: number; podId: string } | null;
  decision: Decision;
  fallbackReason: FallbackReason | null;
  fallbackDetail?: string | null;
  model: string | null;
  lora: string | null;
  promptTokens: number;
  truncated: boolean;
  blocks?: number;
  promptChars?: { cached: number; tokenized: number };
  timings: RouteTimings;
  shed: { retryAfterS: number; status: number } | null;
  kvReuseReport?: boolean;
  /** The request's tenant and class (policies only). */
  tenant?: { name: string; source: string; serviceClass: { name: string; priority: number } } | null;
  admission?: { action: string; detail: string | null } | null;
}

const round = (x: number): number => Math.round(x * 1000) / 1000;

/** Pure: the span attributes of one decision (every candidate's terms, the choice, timings). */
export function decisionAttributes(o: DecisionRecord): Attributes {
  const c = o.decision.candidates;
  const attrs: Attributes = {
    [A.ATTR_GEN_AI_USAGE_INPUT_TOKENS]: o.promptTokens,
    [A.ATTR_KINFERENCE_PROMPT_TRUNCATED]: o.truncated,
    [A.ATTR_KINFERENCE_CANDIDATES_COUNT]: c.length,
    [A.ATTR_KINFERENCE_CANDIDATES_POD_IDS]: c.map((p) => p.podId),
    [A.ATTR_KINFERENCE_CANDIDATES_CACHED_TOKENS]: c.map((p) => p.cachedTokens),
    [A.ATTR_KINFERENCE_CANDIDATES_CPU_TOKENS]: c.map((p) => p.cpuTokens),
    [A.ATTR_KINFERENCE_CANDIDATES_QUEUE_MS]: c.map((p) => round(p.queueMs)),
    [A.ATTR_KINFERENCE_CANDIDATES_RUNNING]: c.map((p) => p.running),
    [A.ATTR_KINFERENCE_CANDIDATES_WAITING]: c.map((p) => p.waiting),
    [A.ATTR_KINFERENCE_CANDIDATES_PREDICTED_TTFT_MS]: c.map((p) => round(p.predictedTtftMs)),
    [A.ATTR_KINFERENCE_CANDIDATES_INDEX_AGE_MS]: c.map((p) =>
      p.indexAgeMs === null ? -1 : Math.round(p.indexAgeMs),
    ),
    [A.ATTR_KINFERENCE_CANDIDATES_HEALTHY]: c.map((p) => p.healthy),
    [A.ATTR_KINFERENCE_CANDIDATES_PREDICTED_ITL_MS]: c.map((p) =>
      p.predictedItlMs === null ? -1 : round(Math.min(p.predictedItlMs, 1e9)),
    ),
    [A.ATTR_KINFERENCE_CANDIDATES_WITHIN_ITL]: c.map((p) => p.withinItl),
    [A.ATTR_KINFERENCE_TARGET]: o.target ? 'pod' : 'kong-default',
    [A.ATTR_KINFERENCE_SHED]: o.shed !== null,
    [A.ATTR_KINFERENCE_DURATION_PARSE_MS]: round(o.timings.parseMs),
    [A.ATTR_KINFERENCE_DURATION_TEMPLATE_MS]: round(o.timings.templateMs),
    [A.ATTR_KINFERENCE_DURATION_TOKENIZE_MS]: round(o.timings.tokenizeMs),
    [A.ATTR_KINFERENCE_DURATION_KEYS_MS]: round(o.timings.keysMs),
    [A.ATTR_KINFERENCE_DURATION_LOOKUP_MS]: round(o.timings.lookupMs),
    [A.ATTR_KINFERENCE_DURATION_PREDICT_MS]: round(o.timings.predictMs),
    [A.ATTR_KINFERENCE_DURATION_ROUTE_MS]: round(o.timings.totalMs),
  };
  const requested = o.lora ?? o.model;
  if (requested !== null) attrs[A.ATTR_GEN_AI_REQUEST_MODEL] = requested;
  if (o.model !== null) attrs[A.ATTR_KINFERENCE_MODEL_BASE] = o.model;
  if (o.lora !== null) attrs[A.ATTR_KINFERENCE_LORA] = o.lora;
  if (o.blocks !== undefined) attrs[A.ATTR_KINFERENCE_PROMPT_BLOCKS] = o.blocks;
  if (o.promptChars) {
    attrs[A.ATTR_KINFERENCE_PROMPT_CACHED_CHARS] = o.promptChars.cached;
    attrs[A.ATTR_KINFERENCE_PROMPT_TOKENIZED_CHARS] = o.promptChars.tokenized;
  }
  const chosen = o.decision.chosen;
  if (chosen) {
    attrs[A.ATTR_KINFERENCE_CHOSEN_POD_ID] = chosen.podId;
    attrs[A.ATTR_KINFERENCE_CHOSEN_CACHED_TOKENS] = chosen.cachedTokens;
    attrs[A.ATTR_KINFERENCE_CHOSEN_PREDICTED_TTFT_MS] = round(chosen.predictedTtftMs);
    if (chosen.indexAgeMs !== null) attrs[A.ATTR_KINFERENCE_INDEX_AGE_MS] = Math.round(chosen.indexAgeMs);
  }
  if (o.target) {
    attrs[A.ATTR_SERVER_ADDRESS] = o.target.host;
    attrs[A.ATTR_SERVER_PORT] = o.target.port;
  }
  if (o.fallbackReason !== null) attrs[A.ATTR_KINFERENCE_FALLBACK_REASON] = o.fallbackReason;
  // A body not read as a chat request (too large, not JSON, /v1/completions…) has no operation we know.
  if (o.fallbackReason === null || !NOT_READ_AS_CHAT.has(o.fallbackReason))
    attrs[A.ATTR_GEN_AI_OPERATION_NAME] = 'chat';
  if (o.fallbackDetail) attrs[A.ATTR_KINFERENCE_FALLBACK_DETAIL] = o.fallbackDetail;
  if (o.shed) attrs[A.ATTR_KINFERENCE_RETRY_AFTER_S] = o.shed.retryAfterS;
  if (o.kvReuseReport) attrs[A.ATTR_KINFERENCE_KV_REUSE_REPORT] = true;
  if (o.tenant) {
    attrs[A.ATTR_KINFERENCE_TENANT] = o.tenant.name;
    attrs[A.ATTR_KINFERENCE_TENANT_SOURCE] = o.tenant.source;
    attrs[A.ATTR_KINFERENCE_CLASS] = o.tenant.serviceClass.name;
    attrs[A.ATTR_KINFERENCE_CLASS_PRIORITY] = o.tenant.serviceClass.priority;
  }
  if (o.admission) {
    attrs[A.ATTR_KINFERENCE_CLASS_ADMISSION] = o.admission.action;
    if (o.admission.detail)
      attrs[A.ATTR_KINFERENCE_CLASS_ADMISSION_DETAIL] = boundedDetail(o.admission.detail);
  }
  return attrs;
}
