// Whether the access phase may fetch the body, from the request headers alone (size known, not compressed).
import type { FallbackReason } from '../../src/core/fallback.js';
import { MAX_REQUEST_HEADERS, type RequestHeaders } from './pdk.js';

/** Whether the access phase may fetch the body, decided from the request headers alone. */
export type BodyGate = { read: true } | { read: false; reason: FallbackReason; detail: string };

const first = (h: RequestHeaders, name: string): string | undefined => h[name]?.[0];

function headerLines(h: RequestHeaders): number {
  let n = 0;
  for (const v of Object.values(h)) n += v.length;
  return n;
}

/**
 * The body crosses the plugin-server socket only when it is known to be there and at most max_body_bytes:
 * the size is what makes kong.request.get_raw_body(max_body_bytes) safe (a larger body nginx spooled to a
 * file would make Kong answer 500) and what keeps a huge body off the single-threaded plugin server.
 * A chunked body has no size until it is read, so it is not read. Compressed bodies are not JSON to us.
 */
export function bodyGate(headers: RequestHeaders, maxBodyBytes: number): BodyGate {
  const encoding = first(headers, 'content-encoding')?.trim().toLowerCase();
  if (encoding && encoding !== 'identity')
    return { read: false, reason: 'body_compressed', detail: `Content-Encoding ${encoding.slice(0, 40)}` };
  const length = first(headers, 'content-length');
  if (length === undefined && headerLines(headers) >= MAX_REQUEST_HEADERS)
    return {
      read: false,
      reason: 'body_length_unknown',
      detail: `${MAX_REQUEST_HEADERS} request headers or more: Kong reads only that many, Content-Length may be past them`,
    };
  if (length === undefined) {
    if (first(headers, 'transfer-encoding') !== undefined)
      return {
        read: false,
        reason: 'body_length_unknown',
        detail: 'chunked body without Content-Length: its size is unknown until read',
      };
    return {
      read: false,
      reason: 'body_empty',
      detail:
        'no Content-Length: no body, or an HTTP/2 body sent without one (its size is unknown, so not read)',
    };
  }
  const n = /^\s*\d+\s*$/.test(length) ? Number(length) : Number.NaN;
  if (!Number.isSafeInteger(n))
    return { read: false, reason: 'body_length_unknown', detail: 'Content-Length is not a number' };
  if (n === 0) return { read: false, reason: 'body_empty', detail: 'Content-Length is 0' };
  if (n > maxBodyBytes)
    return {
      read: false,
      reason: 'body_too_large',
      detail: `body is ${n} bytes, over max_body_bytes ${maxBodyBytes}`,
    };
  return { read: true };
}
