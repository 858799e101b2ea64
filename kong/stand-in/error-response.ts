// kong.response.error's answer as Kong 3.9 builds it: Accept-negotiated type, template, request_id.

/**
 * kong.response.error (kong/pdk/response.lua) with kong/tools/http.lua's templates: the content type is the
 * Accept value with the highest q (unknown types and none at all give JSON), the body is that type's
 * template with the message and the request id. The JSON template is Kong's, byte for byte (its newlines
 * and missing spaces included).
 */

const MIME_TYPES: Record<string, string> = {
  'text/html': 'text/html; charset=utf-8',
  'application/json': 'application/json; charset=utf-8',
  'text/plain': 'text/plain; charset=utf-8',
  'application/xml': 'application/xml; charset=utf-8',
  application: 'application/json; charset=utf-8',
  text: 'text/plain; charset=utf-8',
};
const DEFAULT_TYPE = 'application/json; charset=utf-8';

/** get_mime_type(media_type) with its default: `x/*` by the major type, `* /*` and unknown ones JSON. */
function mimeType(media: string): string {
  const [major, minor] = media.split('/');
  if (minor === '*') return major === '*' ? DEFAULT_TYPE : (MIME_TYPES[major!] ?? DEFAULT_TYPE);
  return MIME_TYPES[media] ?? DEFAULT_TYPE;
}

/** tools/http.lua get_response_type: the first Accept value with the highest q wins. */
export function responseType(accept: string | undefined): string {
  let type = DEFAULT_TYPE;
  if (accept === undefined) return type;
  let best = 0;
  for (const raw of accept.split(',')) {
    const m = /^\s*((?:[a-z0-9][a-z0-9\-!#$&^_+.]+|\*)\/(?:[a-z0-9][a-z0-9\-!#$&^_+.]+|\*))(.*)$/i.exec(raw);
    if (!m) continue;
    const q = /;\s*q=(1(?:\.0{0,3})?|0(?:\.\d{0,3})?)\s*(?:;|$)/i.exec(m[2]!);
    const quality = q ? Number(q[1]) : 1;
    if (quality > best) {
      best = quality;
      type = mimeType(m[1]!.toLowerCase());
    }
  }
  return type;
}

function template(type: string, message: string, requestId: string): string {
  if (type.startsWith('text/html'))
    return `<!doctype html>\n<html>\n  <head>\n    <meta charset="utf-8">\n    <title>Error</title>\n  </head>\n  <body>\n    <h1>Error</h1>\n    <p>${message}.</p>\n    <p>request_id: ${requestId}</p>\n  </body>\n</html>\n`;
  if (type.startsWith('application/xml'))
    return `<?xml version="1.0" encoding="UTF-8"?>\n<error>\n  <message>${message}</message>\n  <requestid>${requestId}</requestid>\n</error>\n`;
  if (type.startsWith('text/plain')) return `${message}\nrequest_id: ${requestId}\n`;
  return `{\n  "message":"${message}",\n  "request_id":"${requestId}"\n}`;
}

export interface KongExit {
  status: number;
  body: Uint8Array | null;
  headers: Record<string, string[]>;
}

/** kong.response.error(status, message, headers) as the client receives it. */
export function kongError(
  status: number,
  message: string,
  requestId: string,
  accept: string | undefined,
  headers: Record<string, string[]> = {},
): KongExit {
  const type = headers['content-type']?.[0] ?? responseType(accept);
  return {
    status,
    body: Buffer.from(template(type, message, requestId)),
    headers: { ...headers, 'content-type': [type] },
  };
}
