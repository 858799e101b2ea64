/**
 * How nginx and Kong read the request target, none of which can fail on what a client sends: a malformed
 * percent-escape is data, not an error (kong.log.serialize() of `?a=%ff%fe&b=%00` must not throw, or the log
 * phase and every logger are lost for that request).
 */

/** Lua strings are bytes; the plugin server reads the msgpack str Kong sends as UTF-8 (bad bytes → U+FFFD). */
function luaText(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

/**
 * lua-nginx-module's ngx_http_lua_unescape_uri for query arguments (NGX_UNESCAPE_URI_COMPONENT): `+` is a
 * space, `%XY` with two hex digits is that byte, and a `%` not followed by two hex digits stays a literal `%`.
 */
export function unescapeArg(s: string): string {
  const src = Buffer.from(s, 'latin1');
  const out = Buffer.allocUnsafe(src.length);
  let n = 0;
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (c === 0x2b) out[n++] = 0x20;
    else if (c === 0x25 && i + 2 < src.length && hexValue(src[i + 1]!) >= 0 && hexValue(src[i + 2]!) >= 0) {
      out[n++] = (hexValue(src[i + 1]!) << 4) | hexValue(src[i + 2]!);
      i += 2;
    } else out[n++] = c;
  }
  return luaText(out.subarray(0, n));
}

export type QueryValue = string | true | (string | true)[];

/** ngx.req.get_uri_args (Kong's default limit is 100 arguments). */
export const MAX_QUERY_ARGS_DEFAULT = 100;

/**
 * ngx.req.get_uri_args(max), which kong.request.get_query() and kong.log.serialize() use: `&`-separated
 * pairs split at the first `=`, `k` alone is `true`, `k=` is "", a pair with an empty key is ignored, a
 * repeated key gathers its values in an array, and arguments past `max` are left out (0: no limit).
 */
export function getUriArgs(
  rawQuery: string,
  max: number = MAX_QUERY_ARGS_DEFAULT,
): Record<string, QueryValue> {
  const out: Record<string, QueryValue> = Object.create(null) as Record<string, QueryValue>;
  if (rawQuery === '') return {};
  let count = 0;
  for (const part of rawQuery.split('&')) {
    if (max > 0 && count >= max) break;
    const eq = part.indexOf('=');
    const key = unescapeArg(eq < 0 ? part : part.slice(0, eq));
    const val: string | true = eq < 0 ? true : unescapeArg(part.slice(eq + 1));
    count++;
    if (key === '') continue;
    const prev = out[key];
    out[key] = prev === undefined ? val : Array.isArray(prev) ? [...prev, val] : [prev, val];
  }
  return { ...out };
}

/** Characters RFC 3986 reserves: Kong's normalize() keeps their escapes (upper-cased) instead of decoding. */
const RESERVED = new Set([...`!*'();:@&=+$,/?%#[]`].map((c) => c.charCodeAt(0)));

/**
 * kong.tools.uri normalize(path, true), what kong.request.get_path() returns: escapes of non-reserved bytes
 * decoded, of reserved ones upper-cased, dot segments resolved, `//` merged. Malformed escapes stay as sent.
 */
export function normalizePath(raw: string): string {
  if (raw === '' || raw === '/') return raw;
  let uri = raw.replace(/%([0-9a-fA-F]{2})/g, (m: string, hex: string) => {
    const n = parseInt(hex, 16);
    return RESERVED.has(n) ? m.toUpperCase() : String.fromCharCode(n);
  });
  const out: string[] = [];
  while (uri.length > 0) {
    if (uri === '/.') uri = '/';
    else if (uri === '/..') {
      uri = '/';
      out.pop();
    } else if (uri === '.' || uri === '..') uri = '';
    else if (uri.startsWith('../')) uri = uri.slice(3);
    else if (uri.startsWith('./')) uri = uri.slice(2);
    else if (uri.startsWith('/./')) uri = uri.slice(2);
    else if (uri.startsWith('/../')) {
      uri = uri.slice(3);
      out.pop();
    } else if (uri.startsWith('//')) uri = uri.slice(1);
    else {
      const i = uri.indexOf('/', 1);
      out.push(i < 0 ? uri : uri.slice(0, i));
      uri = i < 0 ? '' : uri.slice(i);
    }
  }
  // Decoded bytes were latin1 code units; Lua hands them on as bytes, read as UTF-8 on the plugin's side.
  return luaText(Buffer.from(out.join(''), 'latin1'));
}

/**
 * Splits a request target (nginx's $request_uri) into the raw path and the raw query ($args), never
 * throwing: absolute-form targets lose their scheme and authority, as nginx parses them.
 */
export function splitRequestTarget(target: string): { rawPath: string; rawQuery: string } {
  let t = target;
  const abs = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?]*/.exec(t);
  if (abs) t = t.slice(abs[0].length) || '/';
  const q = t.indexOf('?');
  return q < 0 ? { rawPath: t, rawQuery: '' } : { rawPath: t.slice(0, q), rawQuery: t.slice(q + 1) };
}
