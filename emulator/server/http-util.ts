// The emulator's HTTP plumbing: POST bodies read as vLLM's FastAPI app reads them, JSON replies.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { withPythonNumbers } from '../../src/core/request.js';
import { isRecord } from '../../src/core/is-record.js';
import {
  jsonNestingDepth,
  jsToPy,
  MAX_JSON_DEPTH,
  pyLoads,
  pyStrRepr,
  pyToJs,
  pyTypeName,
  type PyValue,
} from './py-json.js';
import { apiError, errorJson, requestValidationError, type ApiError, type Json } from './vllm-errors.js';

/** An emulator limit (vLLM has none): a larger body gets 413. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** Which request model reads the body: it decides what a body that is not a JSON object gets. */
export type BodyModel = 'chat' | 'completion' | 'tokenize' | 'detokenize';

export type BodyResult =
  | {
      ok: true;
      json: Json;
      /** The body as Python's json.loads decoded it (for the texts of validation errors). */
      py: () => PyValue;
    }
  | { ok: false; error: ApiError };

const utf8 = new TextDecoder('utf-8', { fatal: true });

const PARSE_FAILED = apiError(400, 'Bad Request', 'There was an error parsing the body');

/** FastAPI reads the body as JSON only for an application/json or application/*+json content type. */
function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType === '') return false;
  const type = (contentType.split(';', 1)[0] as string).trim().toLowerCase();
  const parts = type.split('/');
  if (parts.length !== 2 || parts[0] !== 'application') return false;
  const sub = parts[1] as string;
  return sub === 'json' || sub.endsWith('+json');
}

type JsonParse = { ok: true; value: unknown; text: string } | { ok: false; error: ApiError };

/**
 * `await request.json()` in FastAPI: UTF-8, then json.loads. Its errors are a JSONDecodeError (a
 * `json_invalid` validation error) or anything else (the body could not be parsed: a byte that is not UTF-8,
 * an integer of more than 4300 digits, nesting deeper than json.loads recurses).
 */
function parseJsonBody(bytes: Buffer): JsonParse {
  let text: string;
  try {
    // json.loads(bytes) drops a UTF-8 BOM, as the decoder does by default.
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, error: PARSE_FAILED };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // json.loads also takes NaN and Infinity; otherwise its error is the one vLLM reports.
    const py = pyLoads(text);
    if (!py.ok && !py.decodeError) return { ok: false, error: PARSE_FAILED };
    if (!py.ok) {
      const error = requestValidationError(
        [
          {
            type: 'json_invalid',
            loc: [py.pos],
            msg: 'JSON decode error',
            input: { repr: '{}' },
            ctx: `{'error': ${pyStrRepr(py.msg)}}`,
          },
        ],
        () => null,
      );
      return { ok: false, error };
    }
    return { ok: true, value: pyToJs(py.value), text };
  }
  // A document JSON.parse takes but json.loads does not: nested deeper than it recurses (RecursionError),
  // or an integer of more than 4300 digits (a plain ValueError).
  if (text.length > 2 * MAX_JSON_DEPTH && jsonNestingDepth(text) > MAX_JSON_DEPTH)
    return { ok: false, error: PARSE_FAILED };
  if (/\d{4301}/.test(text) && !pyLoads(text).ok) return { ok: false, error: PARSE_FAILED };
  return { ok: true, value, text };
}

/**
 * Reads a POST body as vLLM's FastAPI app does, failures as the ApiError vLLM answers:
 * - with a JSON content type, a body that is not UTF-8, or nested deeper than json.loads recurses, is "There
 *   was an error parsing the body", one that json.loads refuses is a `json_invalid` validation error at the
 *   character where it stopped;
 * - then validate_json_request: a content type other than application/json (parameters aside) is
 *   "Unsupported Media Type: Only 'application/json' is allowed";
 * - an empty body, or `null`, is the missing body;
 * - a body that is not an object fails in the request model: for chat, completions and tokenize the first
 *   model validator calls `.get` on it (AttributeError, a 500); /detokenize's model refuses it (400).
 */
export async function readRequestBody(req: IncomingMessage, model: BodyModel): Promise<BodyResult> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    const b = c as Buffer;
    size += b.length;
    if (size > MAX_BODY_BYTES)
      return { ok: false, error: apiError(413, 'BadRequestError', 'request body too large') };
    chunks.push(b);
  }
  const bytes = Buffer.concat(chunks);
  const contentType = req.headers['content-type'];
  let value: unknown = null;
  let text: string | null = null;
  if (bytes.length > 0 && isJsonMediaType(contentType)) {
    let parsed: JsonParse;
    try {
      parsed = parseJsonBody(bytes);
    } catch {
      // FastAPI answers any exception while it reads the body so (`except Exception`, fastapi/routing.py).
      return { ok: false, error: PARSE_FAILED };
    }
    if (!parsed.ok) return { ok: false, error: parsed.error };
    ({ value, text } = parsed);
  }
  const media = (typeof contentType === 'string' ? contentType : '').toLowerCase().split(';', 1)[0];
  if (media !== 'application/json')
    return {
      ok: false,
      error: requestValidationError(
        ["Unsupported Media Type: Only 'application/json' is allowed"],
        () => null,
      ),
    };
  const py = (): PyValue => {
    if (text === null) return jsToPy(value);
    const r = pyLoads(text);
    return r.ok ? r.value : jsToPy(value);
  };
  if (value === null)
    return {
      ok: false,
      error: requestValidationError(
        [{ type: 'missing', loc: [], msg: 'Field required', input: { repr: 'None' } }],
        py,
      ),
    };
  if (!isRecord(value)) {
    if (model === 'detokenize')
      return {
        ok: false,
        error: requestValidationError(
          [
            {
              type: 'model_attributes_type',
              loc: [],
              msg: 'Input should be a valid dictionary or object to extract fields from',
              input: { at: [] },
            },
          ],
          py,
        ),
      };
    return {
      ok: false,
      error: apiError(500, 'InternalServerError', `'${pyTypeName(value)}' object has no attribute 'get'`),
    };
  }
  // json.loads, as vLLM: the template prints tool numbers back as Python does (core/python-json.ts).
  const json = (text === null ? value : withPythonNumbers(value, text)) as Json;
  return { ok: true, json, py };
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, e: ApiError): void {
  sendJson(res, e.status, errorJson(e));
}
