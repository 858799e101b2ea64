/**
 * Our narrow, typed view of the kong-pdk object: only the calls the plugin makes, with the types Kong really
 * sends (kong.md §1.3, §2.5): the raw body is a Uint8Array (msgpack bin), request headers a multimap of
 * lower-cased names (StepMultiMap, every value an array), kong.log.serialize() is a JSON string. Each method
 * is ONE RPC round trip to Kong; the access path makes at most four of them, five with expose_headers and
 * tracing off, one more when it asks the pod for reused-block reports (counted in
 * spec/02-integration/plugin/pdk-calls.spec.ts).
 */

/** kong-pdk's bridge: a Proxy where every property path is callable as `kong.<a>.<b>(...)`. */
export type RawKong = { [k: string]: RawKong } & ((...args: unknown[]) => Promise<unknown>);

export type SharedValue = string | number | boolean;

/** Request headers: lower-cased name → values in arrival order. */
export type RequestHeaders = Record<string, string[]>;

/**
 * Header lines asked of kong.request.get_headers: its most. Its default, 100, is easily passed by a client
 * or proxies that add many headers, and the lines past it (Content-Length, traceparent) are dropped silently.
 */
export const MAX_REQUEST_HEADERS = 1000;

export interface AccessPdk {
  /**
   * kong.request.get_raw_body(max_allowed_file_size): a body nginx spooled to a temp file is read from it when
   * it is at most that size. Call it only for a body known to be that small: otherwise Lua returns nil, which
   * Kong's bridge cannot pack (fix_raw) — a Lua error, a 500, and an event never stepped again.
   */
  getRawBody(maxFileBytes: number): Promise<Uint8Array | string | undefined>;
  /** kong.request.get_headers(MAX_REQUEST_HEADERS). */
  getHeaders(): Promise<RequestHeaders>;
  setTarget(host: string, port: number): Promise<void>;
  /** kong.service.request.set_headers: one round trip for any number of upstream headers. */
  setUpstreamHeaders(headers: Record<string, string>): Promise<void>;
  /** kong.service.request.set_raw_body: the body sent upstream (Kong sets its Content-Length). */
  setUpstreamBody(body: Uint8Array): Promise<void>;
  ctxSharedSet(key: string, value: SharedValue): Promise<void>;
  /** kong.response.set_header: a header of the answer the client gets (set in access, sent with it). */
  setResponseHeader(name: string, value: string): Promise<void>;
  /** kong.response.exit: Kong never steps the event again, so it is not awaited (and nothing may follow). */
  exit(status: number, body: string, headers: Record<string, string>): void;
}

export interface LogPdk {
  serialize(): Promise<string | undefined>;
  ctxSharedGet(key: string): Promise<unknown>;
  /** kong.log.warn: Kong writes it to error.log, namespaced `[kinference]`, at a level shown by default. */
  warn(message: string): Promise<void>;
}

function headerMap(v: unknown): RequestHeaders {
  const out: RequestHeaders = {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return out;
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    const values = Array.isArray(x) ? x : [x];
    out[k.toLowerCase()] = values.filter((y): y is string => typeof y === 'string');
  }
  return out;
}

export function wrapKong(kong: RawKong): AccessPdk & LogPdk {
  const k = kong as unknown as {
    request: { getRawBody(maxFile: number): Promise<unknown>; getHeaders(max: number): Promise<unknown> };
    service: {
      setTarget(h: string, p: number): Promise<unknown>;
      request: {
        setHeaders(h: Record<string, string>): Promise<unknown>;
        setRawBody(b: Uint8Array): Promise<unknown>;
      };
    };
    response: {
      exit(s: number, b: string, h: Record<string, string>): Promise<unknown>;
      setHeader(n: string, v: string): Promise<unknown>;
    };
    ctx: { shared: { set(k: string, v: SharedValue): Promise<unknown>; get(k: string): Promise<unknown> } };
    log: { serialize(): Promise<unknown>; warn(m: string): Promise<unknown> };
  };
  return {
    async getRawBody(maxFileBytes) {
      const b = await k.request.getRawBody(maxFileBytes);
      return b instanceof Uint8Array || typeof b === 'string' ? b : undefined;
    },
    async getHeaders() {
      return headerMap(await k.request.getHeaders(MAX_REQUEST_HEADERS));
    },
    async setTarget(host, port) {
      await k.service.setTarget(host, port);
    },
    async setUpstreamHeaders(headers) {
      await k.service.request.setHeaders(headers);
    },
    async setUpstreamBody(body) {
      await k.service.request.setRawBody(body);
    },
    async ctxSharedSet(key, value) {
      await k.ctx.shared.set(key, value);
    },
    async setResponseHeader(name, value) {
      await k.response.setHeader(name, value);
    },
    exit(status, body, headers) {
      void k.response.exit(status, body, headers);
    },
    async serialize() {
      const s = await k.log.serialize();
      return typeof s === 'string' ? s : undefined;
    },
    ctxSharedGet(key) {
      return k.ctx.shared.get(key);
    },
    async warn(message) {
      await k.log.warn(message);
    },
  };
}
