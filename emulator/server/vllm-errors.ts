/**
 * vLLM's error responses, as of v0.26.1rc1 (commit 53f6dd5c6): the ErrorResponse body, the message
 * sanitizing every one of them goes through, the text of a request-validation failure (FastAPI's
 * RequestValidationError as vLLM's handler prints it), and the messages of the checks the emulator makes.
 */
import { pyRepr, pyStrRepr, pyTupleRepr, type PyValue } from './py-json.js';
import { pyStrip } from '../../src/core/python-str.js';

export type Json = Record<string, unknown>;

/**
 * ErrorInfo.type: an exception's class for errors raised while serving (create_error_response), the HTTP
 * reason phrase for request-validation and HTTPException failures.
 */
export type ErrorType =
  'BadRequestError' | 'NotFoundError' | 'InternalServerError' | 'ServiceUnavailableError' | 'Bad Request';

export interface ApiError {
  status: number;
  type: ErrorType;
  message: string;
  param: string | null;
}

export const apiError = (
  status: number,
  type: ErrorType,
  message: string,
  param: string | null = null,
): ApiError => ({ status, type, message, param });

/** A ValueError raised while serving: 400 BadRequestError, no param (create_error_response). */
export const badRequest = (message: string, param: string | null = null): ApiError =>
  apiError(400, 'BadRequestError', message, param);

/** EngineDeadError's message (vllm/v1/engine/exceptions.py): a 500 InternalServerError. */
export const ENGINE_DEAD_MESSAGE =
  'EngineCore encountered an issue. See stack trace (above) for the root cause.';

/**
 * An exception nothing else answered, as vLLM's catch-all handler answers it (create_error_response of the
 * exception: 500 InternalServerError, its text). A JS stack overflow reads as Python's RecursionError.
 */
export function internalServerError(e: unknown): ApiError {
  const stackOverflow = e instanceof RangeError && /call stack/i.test(e.message);
  const message = stackOverflow
    ? 'maximum recursion depth exceeded'
    : e instanceof Error
      ? e.message
      : String(e);
  return apiError(500, 'InternalServerError', message);
}

// The regex module's classes: \w, \s and . (any character but a newline).
const W = String.raw`\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}`;
const SANITIZERS: readonly [RegExp, string][] = [
  [/ at 0x[0-9a-f]+>/gu, '>'],
  [
    /\n?\p{White_Space}*File "[^"]+", line \p{Nd}+, in [^\p{White_Space}]+(?:\n\p{White_Space}+[^\n]*)?/gu,
    '',
  ],
  [new RegExp(String.raw`/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[${W}.\-]+)+`, 'gu'), '<path>'],
  [new RegExp(String.raw`(?:/[${W}\-]+)+/[${W}\-]+\.[${W}]+`, 'gu'), '<path>'],
];

/**
 * sanitize_message (vllm/entrypoints/serve/utils/api_utils.py), applied to every error message vLLM sends:
 * memory addresses, traceback frames and file paths are cut, so a path in a request (a model name like
 * `/models/x.y`, a prompt quoted back) comes out as `<path>`.
 */
export function sanitizeMessage(message: string): string {
  let m = message;
  for (const [re, to] of SANITIZERS) m = m.replace(re, to);
  return pyStrip(m, null, true, true);
}

/** vLLM's ErrorResponse: {"error": {"message", "type", "param", "code": <HTTP status>}}. */
export function errorJson(e: ApiError): Json {
  return { error: { message: sanitizeMessage(e.message), type: e.type, param: e.param, code: e.status } };
}

/** str() of VLLMValidationError: the message, then " (parameter=P, value=V)" for those that are set. */
export function vllmValidationText(message: string, parameter: string | null, value?: string): string {
  const extras: string[] = [];
  if (parameter !== null) extras.push(`parameter=${parameter}`);
  if (value !== undefined) extras.push(`value=${value}`);
  return extras.length > 0 ? `${message} (${extras.join(', ')})` : message;
}

/** A VLLMValidationError raised while serving: 400 BadRequestError with its parameter as param. */
export function vllmValidationError(message: string, parameter: string | null, value?: string): ApiError {
  return badRequest(vllmValidationText(message, parameter, value), parameter);
}

export type Loc = (string | number)[];

/** One entry of pydantic's `errors()` list, located relative to the request body. */
export interface LineError {
  type: string;
  loc: Loc;
  msg: string;
  /** The input: where it sits in the body (keys and indexes; [] is the body), or its repr. */
  input: { at: Loc; withToolChoice?: boolean } | { repr: string };
  /** repr of `ctx`, when the error has one. */
  ctx?: string;
  /** Set when ctx.error is a VLLMValidationError: its `parameter`. */
  vllmParameter?: string | null;
}

/** A pydantic ValueError raised by a model validator: `VLLMValidationError(message, parameter=…)`. */
export function validatorError(message: string, parameter: string | null, value?: string): LineError {
  return {
    type: 'value_error',
    loc: [],
    msg: `Value error, ${vllmValidationText(message, parameter, value)}`,
    input: { at: [] },
    ctx: `{'error': VLLMValidationError(${pyStrRepr(message)})}`,
    vllmParameter: parameter,
  };
}

// clean_loc_for_param: wrapper and union-branch markers that are not field names.
const BRACKETED = /[[\]{}()]/;
const INTERNAL_LOC_MARKERS = new Set([
  'function-wrap',
  'function-after',
  'function-before',
  'function-plain',
  'json-or-python',
  'lax-or-strict',
  'chain',
  'default',
  'nullable',
  'tagged-union',
  'union',
  'call',
  'arguments',
  'is-instance',
  'is-subclass',
  'callable',
  'str',
  'int',
  'float',
  'bool',
  'bytes',
  'bytearray',
  'list',
  'tuple',
  'dict',
  'set',
  'frozenset',
  'complex',
  'none',
  'nonetype',
]);

function paramOfLoc(loc: Loc): string {
  const all = loc.map(String);
  const kept = all.filter((s) => !BRACKETED.test(s) && !INTERNAL_LOC_MARKERS.has(s.toLowerCase()));
  return (kept.length > 0 ? kept : all).join('.');
}

/**
 * A request that fails validation, as vLLM's validation_exception_handler answers it: 400, type "Bad
 * Request", the message "N validation error(s):" then each error's repr on its own line, and as param the
 * first VLLMValidationError's parameter, else the first error's location without pydantic's markers.
 * `body` gives the request body as Python decoded it (the inputs are printed from it).
 */
export function requestValidationError(
  errors: readonly (LineError | string)[],
  body: () => PyValue,
): ApiError {
  let param: string | null = null;
  for (const e of errors)
    if (typeof e !== 'string' && e.vllmParameter !== undefined) {
      param = e.vllmParameter;
      break;
    }
  const first = errors[0];
  if (param === null && first !== undefined && typeof first !== 'string')
    param = paramOfLoc(['body', ...first.loc]);
  let root: PyValue | undefined;
  const inputRepr = (e: LineError): string => {
    if ('repr' in e.input) return e.input.repr;
    root ??= body();
    let v: PyValue | undefined = root;
    for (const k of e.input.at) {
      if (v instanceof Map && typeof k === 'string') v = v.get(k);
      else if (Array.isArray(v) && typeof k === 'number') v = v[k];
      else v = undefined;
    }
    // check_tool_usage sets tool_choice in the body before the validators after it run.
    if (e.input.withToolChoice === true && v instanceof Map && !v.has('tool_choice'))
      v = new Map([...v, ['tool_choice', 'auto']]);
    return v === undefined ? 'None' : pyRepr(v);
  };
  const line = (e: LineError | string): string =>
    typeof e === 'string'
      ? e
      : `{'type': ${pyStrRepr(e.type)}, 'loc': ${pyTupleRepr(['body', ...e.loc])}, 'msg': ${pyStrRepr(e.msg)}, ` +
        `'input': ${inputRepr(e)}${e.ctx !== undefined ? `, 'ctx': ${e.ctx}` : ''}}`;
  const n = errors.length;
  const message =
    n === 0
      ? 'Validation error'
      : `${n} validation ${n === 1 ? 'error' : 'errors'}:\n${errors.map((e) => `  ${line(e)}\n`).join('')}`.trimEnd();
  return apiError(400, 'Bad Request', message, param);
}
