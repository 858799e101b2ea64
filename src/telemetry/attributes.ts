/**
 * Span names and attribute names: the only place they are spelled. GenAI and server names are copied from
 * the OpenTelemetry semantic conventions (gen_ai.* is still "development" status, so we pin the strings here
 * rather than import the unstable entry point); everything routing-specific is `kinference.*`.
 * Per-candidate values are parallel arrays, index i describing the same pod in every `candidates.*` array
 * (ranked best first, as `explain` prints them).
 */

/** The access-phase decision span (INTERNAL; parent: the incoming traceparent). */
export const SPAN_ROUTE = 'kinference.route' as const;
/** The log-phase span (INTERNAL; child of kinference.route): the upstream's measured time to first byte. */
export const SPAN_TTFT = 'kinference.ttft' as const;

// --- OpenTelemetry semantic conventions (resource, gen_ai, server, http) -------------------------------------
export const ATTR_SERVICE_NAME = 'service.name' as const;
export const ATTR_SERVICE_VERSION = 'service.version' as const;
/** `chat` for chat completions. */
export const ATTR_GEN_AI_OPERATION_NAME = 'gen_ai.operation.name' as const;
/** The model name the client asked for (a base model, or a LoRA adapter name). */
export const ATTR_GEN_AI_REQUEST_MODEL = 'gen_ai.request.model' as const;
/** Prompt tokens after the chat template, as the router counted them. */
export const ATTR_GEN_AI_USAGE_INPUT_TOKENS = 'gen_ai.usage.input_tokens' as const;
/** The chosen pod's host and port (where the request is proxied). */
export const ATTR_SERVER_ADDRESS = 'server.address' as const;
export const ATTR_SERVER_PORT = 'server.port' as const;
/** Status the upstream answered with (log phase). */
export const ATTR_HTTP_RESPONSE_STATUS_CODE = 'http.response.status_code' as const;

// --- the request ---------------------------------------------------------------------------------------
/** Base model whose pods were candidates (differs from gen_ai.request.model for LoRA adapters). */
export const ATTR_KINFERENCE_MODEL_BASE = 'kinference.model.base' as const;
export const ATTR_KINFERENCE_LORA = 'kinference.lora' as const;
export const ATTR_KINFERENCE_PROMPT_BLOCKS = 'kinference.prompt.blocks' as const;
export const ATTR_KINFERENCE_PROMPT_TRUNCATED = 'kinference.prompt.truncated' as const;
/** Characters of the rendered prompt served by the segment cache / tokenized for this request. */
export const ATTR_KINFERENCE_PROMPT_CACHED_CHARS = 'kinference.prompt.cached_chars' as const;
export const ATTR_KINFERENCE_PROMPT_TOKENIZED_CHARS = 'kinference.prompt.tokenized_chars' as const;

// --- every candidate (parallel arrays, best first) -------------------------------------------------------
export const ATTR_KINFERENCE_CANDIDATES_COUNT = 'kinference.candidates.count' as const;
export const ATTR_KINFERENCE_CANDIDATES_POD_IDS = 'kinference.candidates.pod_ids' as const;
export const ATTR_KINFERENCE_CANDIDATES_CACHED_TOKENS = 'kinference.candidates.cached_tokens' as const;
export const ATTR_KINFERENCE_CANDIDATES_CPU_TOKENS = 'kinference.candidates.cpu_tokens' as const;
export const ATTR_KINFERENCE_CANDIDATES_QUEUE_MS = 'kinference.candidates.queue_ms' as const;
export const ATTR_KINFERENCE_CANDIDATES_RUNNING = 'kinference.candidates.running' as const;
export const ATTR_KINFERENCE_CANDIDATES_WAITING = 'kinference.candidates.waiting' as const;
export const ATTR_KINFERENCE_CANDIDATES_PREDICTED_TTFT_MS =
  'kinference.candidates.predicted_ttft_ms' as const;
/** Age of each pod's freshest index data, ms; -1 when the index never heard from the pod. */
export const ATTR_KINFERENCE_CANDIDATES_INDEX_AGE_MS = 'kinference.candidates.index_age_ms' as const;
export const ATTR_KINFERENCE_CANDIDATES_HEALTHY = 'kinference.candidates.healthy' as const;
/** ITL guard (itl_slo_ms): each pod's predicted ITL if it took the request, ms (capped at 1e9); -1 when off. */
export const ATTR_KINFERENCE_CANDIDATES_PREDICTED_ITL_MS = 'kinference.candidates.predicted_itl_ms' as const;
/** ITL guard: whether each pod could take the request within the ITL bound and its KV cache. */
export const ATTR_KINFERENCE_CANDIDATES_WITHIN_ITL = 'kinference.candidates.within_itl' as const;

// --- the choice ----------------------------------------------------------------------------------------
export const ATTR_KINFERENCE_CHOSEN_POD_ID = 'kinference.chosen.pod_id' as const;
export const ATTR_KINFERENCE_CHOSEN_CACHED_TOKENS = 'kinference.chosen.cached_tokens' as const;
export const ATTR_KINFERENCE_CHOSEN_PREDICTED_TTFT_MS = 'kinference.chosen.predicted_ttft_ms' as const;
/** The chosen pod's index age (how old the cache knowledge the choice rests on is), ms. */
export const ATTR_KINFERENCE_INDEX_AGE_MS = 'kinference.index.age_ms' as const;
/** `pod` when the plugin set the target, `kong-default` when the service url was left in place. */
export const ATTR_KINFERENCE_TARGET = 'kinference.target' as const;
/** A FallbackReason (src/core/fallback.ts) whenever the choice was made without full information. */
export const ATTR_KINFERENCE_FALLBACK_REASON = 'kinference.fallback.reason' as const;
export const ATTR_KINFERENCE_FALLBACK_DETAIL = 'kinference.fallback.detail' as const;
export const ATTR_KINFERENCE_SHED = 'kinference.shed' as const;
export const ATTR_KINFERENCE_RETRY_AFTER_S = 'kinference.shed.retry_after_s' as const;
/** True when the request asks its pod to report the cached blocks it reuses (kv_reuse_reports_ms). */
export const ATTR_KINFERENCE_KV_REUSE_REPORT = 'kinference.kv_reuse_report' as const;
// --- tenants and service classes (policies only) ---------------------------------------------------------
/** The request's tenant: a span attribute only, never a metric label (tenant names are unbounded). */
export const ATTR_KINFERENCE_TENANT = 'kinference.tenant' as const;
/** What named the tenant: consumer, consumer_group, header, user or default. */
export const ATTR_KINFERENCE_TENANT_SOURCE = 'kinference.tenant.source' as const;
export const ATTR_KINFERENCE_CLASS = 'kinference.class' as const;
export const ATTR_KINFERENCE_CLASS_PRIORITY = 'kinference.class.priority' as const;
/** Class admission: best, moved, shed or over_objective (src/router/outcome.ts ClassAdmission). */
export const ATTR_KINFERENCE_CLASS_ADMISSION = 'kinference.class.admission' as const;
/** Which higher class each refused pod would have pushed past its objective (bounded). */
export const ATTR_KINFERENCE_CLASS_ADMISSION_DETAIL = 'kinference.class.admission_detail' as const;
/** Set when the plugin glue itself failed and let the request through untouched. */
export const ATTR_KINFERENCE_PLUGIN_ERROR = 'kinference.plugin.error' as const;

// --- where the time went ---------------------------------------------------------------------------------
export const ATTR_KINFERENCE_DURATION_PARSE_MS = 'kinference.duration.parse_ms' as const;
export const ATTR_KINFERENCE_DURATION_TEMPLATE_MS = 'kinference.duration.template_ms' as const;
export const ATTR_KINFERENCE_DURATION_TOKENIZE_MS = 'kinference.duration.tokenize_ms' as const;
export const ATTR_KINFERENCE_DURATION_KEYS_MS = 'kinference.duration.keys_ms' as const;
export const ATTR_KINFERENCE_DURATION_LOOKUP_MS = 'kinference.duration.lookup_ms' as const;
export const ATTR_KINFERENCE_DURATION_PREDICT_MS = 'kinference.duration.predict_ms' as const;
export const ATTR_KINFERENCE_DURATION_ROUTE_MS = 'kinference.duration.route_ms' as const;

// --- log phase -----------------------------------------------------------------------------------------
/** Kong's latencies.proxy: request sent → first response byte from the pod (≈ TTFT when streaming). */
export const ATTR_KINFERENCE_TTFT_ACTUAL_MS = 'kinference.ttft.actual_ms' as const;
export const ATTR_KINFERENCE_TTFT_PREDICTED_MS = 'kinference.ttft.predicted_ms' as const;
/** actual − predicted, ms. */
export const ATTR_KINFERENCE_TTFT_ERROR_MS = 'kinference.ttft.error_ms' as const;
/** Whether the measurement fed the online calibration (streaming 200 responses from a chosen pod only). */
export const ATTR_KINFERENCE_TTFT_OBSERVED = 'kinference.ttft.observed' as const;

// --- usage and cost (policies.prices; src/usage) ---------------------------------------------------------
/** Predicted cost before forwarding: prompt, predicted cached tokens, reserved output (access phase). */
export const ATTR_KINFERENCE_COST_PREDICTED = 'kinference.cost.predicted' as const;
/** The currency of the cost attributes (policies.currency). */
export const ATTR_KINFERENCE_COST_CURRENCY = 'kinference.cost.currency' as const;
/** Prompt tokens priced as cached: the chosen pod's predicted prefix on GPU and its CPU tier. */
export const ATTR_KINFERENCE_USAGE_CACHED_TOKENS = 'kinference.usage.cached_tokens' as const;
/** Output tokens, from the bytes Kong sent (log phase; estimated unless the answer had no body). */
export const ATTR_GEN_AI_USAGE_OUTPUT_TOKENS = 'gen_ai.usage.output_tokens' as const;
/** Whether gen_ai.usage.output_tokens is an estimate (true for every answer with a body). */
export const ATTR_KINFERENCE_USAGE_OUTPUT_ESTIMATED = 'kinference.usage.output_tokens_estimated' as const;
/** Cost with the output counted in the log phase; absent when a price it needs is unknown. */
export const ATTR_KINFERENCE_COST_ESTIMATED = 'kinference.cost.estimated' as const;
