/**
 * One error class with stable codes. Expected outcomes (a body that is not a chat request, Redis down) are
 * values, not exceptions; these are for bad startup config and programmer errors. docs/errors.md lists
 * every code, and spec/01-unit/core/errors.spec.ts checks that both agree.
 */
export const ERROR_CODES = {
  KINF_ERR_CONFIG: 'Invalid configuration',
  KINF_ERR_CONFIG_FILE: 'Configuration file cannot be read or parsed',
  KINF_ERR_TOKENIZER_SPEC: 'Tokenizer specification cannot be loaded',
  KINF_ERR_TEMPLATE_SPEC: 'Chat template cannot be loaded',
  KINF_ERR_REDIS_TIMEOUT: 'Redis did not answer within the configured timeout',
  KINF_ERR_REDIS: 'Redis command failed',
  KINF_ERR_INDEX_REPLY: 'Unexpected reply from the index lookup script',
  KINF_ERR_LEASE_LOST: 'Another process holds the writer lease: the index refused the write',
  KINF_ERR_INTERNAL: 'Internal error',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class KinferenceError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KinferenceError';
    this.code = code;
  }
}

export function isKinferenceError(e: unknown, code?: ErrorCode): e is KinferenceError {
  return e instanceof KinferenceError && (code === undefined || e.code === code);
}
