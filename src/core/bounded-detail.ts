// Bounded one-line details of what went wrong, for log lines, span attributes and fallback details.
import { isKinferenceError } from './errors.js';

/** The most characters of one detail (an error message, a list of pods) a log line or span attribute carries. */
export const DETAIL_MAX_CHARS = 300;

/**
 * A bounded description of what went wrong, for logs, span attributes and fallback details: a text as given,
 * or a thrown value's message, prefixed with its KINF_ERR_* code when it has one (so a log line can be
 * looked up), cut at DETAIL_MAX_CHARS. Callers pass error messages and field names, never prompt text.
 */
export function boundedDetail(what: unknown): string {
  const message =
    typeof what === 'string' ? what : String((what as { message?: unknown } | null)?.message ?? what);
  const code = isKinferenceError(what) ? what.code : null;
  return (code && !message.startsWith(code) ? `${code}: ${message}` : message).slice(0, DETAIL_MAX_CHARS);
}
