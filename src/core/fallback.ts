// The closed list of fallback reasons: why a request was routed on load alone or left to Kong.
/** Reasons for which the body was not read as a chat request (not read at all, not JSON, not chat). */
const NOT_READ_AS_CHAT_REASONS = [
  'body_too_large',
  'body_empty',
  'body_compressed',
  'body_length_unknown',
  'body_unreadable',
  'body_not_json',
  'invalid_utf8',
  'body_not_chat',
] as const;

/**
 * Every degraded path ends in one of these reasons. It goes on the span and in `explain`, and the request
 * is still served (fail open).
 */
export const FALLBACK_REASONS = [
  ...NOT_READ_AS_CHAT_REASONS,
  'multimodal_content',
  'template_error',
  'tokenizer_error',
  'tokenizer_loading',
  'prompt_truncated',
  'context_window_exceeded',
  'template_budget_exceeded',
  'decision_budget_exceeded',
  'decision_worker_failed',
  'index_timeout',
  'index_error',
  'no_pods_in_index',
  'all_pods_unhealthy',
  'stale_index',
  'internal_error',
] as const;

export type FallbackReason = (typeof FALLBACK_REASONS)[number];

export const NOT_READ_AS_CHAT: ReadonlySet<FallbackReason> = new Set(NOT_READ_AS_CHAT_REASONS);
