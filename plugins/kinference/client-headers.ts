// Request headers only the gateway may set (x-data-parallel-rank, x-kinference-*): found, bounded, cleared.
import { MAX_REQUEST_HEADERS, type RequestHeaders } from './pdk.js';

/**
 * Headers a client must not choose for itself: vLLM routes a request to the data-parallel rank its
 * x-data-parallel-rank names, and x-kinference-* is what the gateway tells the pod (expose_headers).
 */
export function isGatewayOwned(name: string): boolean {
  return name === 'x-data-parallel-rank' || name.startsWith('x-kinference-');
}

/**
 * Most gateway-owned header names one request may carry before it is refused. Kong clears one name per PDK
 * round trip (kong.service.request.clear_header), so without a bound a client could buy a thousand round trips
 * on the single-threaded plugin server with a few kilobytes of headers. The plugin itself sets at most 7.
 */
export const MAX_GATEWAY_OWNED_HEADERS = 16;

/** Names of the client-sent headers to clear before proxying (lower-cased, each once, in arrival order). */
export function gatewayOwnedHeaders(headers: RequestHeaders): string[] {
  return Object.keys(headers).filter(isGatewayOwned);
}

export interface HeaderRefusal {
  status: number;
  body: string;
  headers: Record<string, string>;
}

function refusal(status: number, code: string, message: string): HeaderRefusal {
  return {
    status,
    body: JSON.stringify({ error: { message, type: 'invalid_request_error', code } }),
    headers: { 'Content-Type': 'application/json' },
  };
}

/**
 * A request whose gateway-owned headers cannot all be cleared, or cannot all be seen: get_headers returns at
 * most MAX_REQUEST_HEADERS lines, and one past them could be an x-data-parallel-rank we never see. Refused
 * with a 4xx naming the header: no servable request carries either (the answer is the client's to fix).
 */
export function refuseHeaders(headers: RequestHeaders, owned: readonly string[]): HeaderRefusal | null {
  let lines = 0;
  for (const v of Object.values(headers)) lines += v.length;
  if (lines >= MAX_REQUEST_HEADERS)
    return refusal(
      431,
      'too_many_headers',
      `the request has ${MAX_REQUEST_HEADERS} or more header lines; expected fewer than ${MAX_REQUEST_HEADERS}`,
    );
  if (owned.length > MAX_GATEWAY_OWNED_HEADERS)
    return refusal(
      400,
      'gateway_headers_not_allowed',
      `the request has ${owned.length} x-kinference-* / x-data-parallel-rank headers; ` +
        'the gateway sets these itself: send none',
    );
  return null;
}
