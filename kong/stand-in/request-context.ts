// Everything Kong keeps about one request (ngx.var, ngx.ctx, balancer data) that the PDK reads.
import type {
  ConsumerEntity,
  ConsumerGroupEntity,
  KeyAuthCredential,
  RouteEntity,
  ServiceEntity,
} from './declarative.js';
import { getUriArgs } from './uri-args.js';

/** Lower-cased header name → values in arrival order (ngx.req.get_headers keeps repeats). */
export type HeaderMap = Map<string, string[]>;

export interface Try {
  ip: string;
  port: number;
  balancer_start: number;
  balancer_latency: number;
  state?: 'failed';
  code?: number;
}

/**
 * Everything Kong keeps about one request (ngx.var, ngx.ctx, balancer_data) that the PDK functions read or
 * change. Mutated by the access phase; the log phase reads the final snapshot.
 */
export interface RequestContext {
  id: string;
  startedAtMs: number;
  startedAtPerf: number;
  method: string;
  /** The path routes match and proxying uses (WHATWG-parsed from the target, so always sendable). */
  path: string;
  /** The path as the client sent it (kong.request.get_raw_path); `path` when not given. */
  rawPath?: string;
  /** nginx's $args: the query exactly as sent, escapes undecoded. */
  rawQuery: string;
  scheme: 'http' | 'https';
  /** Host the client asked for (Host header, without port) and Kong's listening port. */
  host: string;
  port: number;
  clientIp: string;
  httpVersion: number;
  /** Client request headers; kong.service.request.* change these (ngx.req.set_header), as in Kong. */
  headers: HeaderMap;
  body: Buffer;
  /**
   * nginx client_body_buffer_size: a larger body is spooled to a file, and kong.request.get_raw_body() then
   * returns nil, which the msgpack bridge cannot pack (fix_raw) → a Lua error → 500.
   */
  bodyBufferBytes: number;
  route: RouteEntity;
  service: ServiceEntity;
  /** balancer_data host/port after kong.service.set_target; null = the service's own host. */
  target: { host: string; port: number } | null;
  /**
   * ngx.var.upstream_host when set: the client's Host for a preserve_host route (the router), then the bare
   * host of set_target (§7 #15) or the value of set_header('host'), whichever came last.
   */
  upstreamHost: string | null;
  upstreamMethod: string;
  upstreamPath: string;
  upstreamQuery: string;
  upstreamBody: Buffer | null;
  retries: number;
  timeouts: { connectMs: number; writeMs: number; readMs: number };
  ctxShared: Map<string, unknown>;
  serializeExtras: Record<string, unknown>;
  tries: Try[];
  /** Filled as the response goes out. */
  response: {
    status: number;
    headers: Record<string, string | string[]>;
    size: number;
    source: 'service' | 'exit' | 'error';
  } | null;
  upstreamStatus: number | null;
  /** nginx's $upstream_status, one status per try (502 failed connection, 504 timeout); absent: no try. */
  upstreamStatuses?: number[];
  /** ngx.ctx.authenticated_consumer / _credential / _consumer_groups, set by an auth plugin in access. */
  consumer?: ConsumerEntity | null;
  credential?: KeyAuthCredential | null;
  consumerGroups?: ConsumerGroupEntity[] | null;
  /**
   * ngx.header as set in access (kong.response.set_header/add_header/set_headers, rate-limiting's headers):
   * lower-cased name → [name as given, values]. They go out with the proxied answer and with an exit.
   */
  responseHeaders?: Map<string, { name: string; values: string[] }>;
  /** nginx's $request_length: request line, headers and body as received, in bytes. */
  requestLength?: number;
  /** ms marks relative to startedAtPerf (Kong's ctx.KONG_* timestamps). */
  marks: { accessEnd?: number; balancerEnd?: number; headers?: number; end?: number };
}

/** kong.request.get_headers() without max_headers (Kong's MAX_HEADERS_DEFAULT, nginx's lua_max_req_headers). */
export const DEFAULT_MAX_HEADERS = 100;

/**
 * kong.request.get_header(name): Kong looks only among the first 100 header lines, like get_headers().
 */
export function headerFirst(h: HeaderMap, name: string): string | undefined {
  const v = headersAsLua(h, DEFAULT_MAX_HEADERS)[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The shape ngx.req.get_headers(max) gives Lua: one value → string, repeats → array, and only the first
 * `max` header lines (each repeat is a line; the rest are silently left out, ngx's "truncated" second
 * value never crosses Kong's bridge). Lines are counted in the map's order: first appearance of each name,
 * its repeats with it, which is nginx's order unless a client interleaves repeated names.
 */
export function headersAsLua(
  h: HeaderMap,
  max: number = DEFAULT_MAX_HEADERS,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  let left = max;
  for (const [k, v] of h) {
    if (left <= 0) break;
    const kept = v.slice(0, left);
    left -= kept.length;
    if (kept.length > 0) out[k] = kept.length === 1 ? kept[0]! : kept;
  }
  return out;
}

/** nginx's $request_uri: the target as the client sent it. */
export function requestUri(ctx: RequestContext): string {
  return (ctx.rawPath ?? ctx.path) + (ctx.rawQuery ? `?${ctx.rawQuery}` : '');
}

/** kong.log.serialize() (kong/pdk/log.lua), the fields plugins read: latencies, tries, status, ids. */
export function serialize(ctx: RequestContext, workspaceId: string): Record<string, unknown> {
  const m = ctx.marks;
  const proxyLatency = m.accessEnd !== undefined ? (m.balancerEnd ?? m.accessEnd) : undefined;
  const waiting = m.headers !== undefined && m.balancerEnd !== undefined ? m.headers - m.balancerEnd : -1;
  const receive = m.end !== undefined && m.headers !== undefined ? m.end - m.headers : 0;
  const requestHeaders = headersAsLua(ctx.headers);
  if ('authorization' in requestHeaders) requestHeaders.authorization = 'REDACTED';
  const out: Record<string, unknown> = {
    request: {
      id: ctx.id,
      uri: requestUri(ctx),
      url: `${ctx.scheme}://${ctx.host}:${ctx.port}${requestUri(ctx)}`,
      // kong.request.get_query(): never throws, whatever escapes the client sent (uri-args.ts).
      querystring: getUriArgs(ctx.rawQuery),
      method: ctx.method,
      headers: requestHeaders,
      // to_decimal(var.request_length): request line + headers + body as received.
      size: ctx.requestLength ?? ctx.body.length,
    },
    upstream_uri: ctx.upstreamPath + (ctx.upstreamQuery ? `?${ctx.upstreamQuery}` : ''),
    response: ctx.response
      ? { status: ctx.response.status, headers: ctx.response.headers, size: ctx.response.size }
      : { status: 0, headers: {}, size: 0 },
    route: {
      id: ctx.route.id,
      name: ctx.route.name,
      paths: ctx.route.paths,
      strip_path: ctx.route.stripPath,
      preserve_host: ctx.route.preserveHost,
      response_buffering: ctx.route.responseBuffering,
    },
    service: {
      id: ctx.service.id,
      name: ctx.service.name,
      host: ctx.service.host,
      port: ctx.service.port,
      protocol: ctx.service.protocol,
      path: ctx.service.path,
      retries: ctx.service.retries,
      read_timeout: ctx.service.readTimeoutMs,
    },
    latencies: {
      kong: Math.round((proxyLatency ?? 0) + receive),
      proxy: waiting < 0 ? -1 : Math.round(waiting),
      request: Math.round(m.end ?? performance.now() - ctx.startedAtPerf),
      receive: Math.round(receive),
    },
    tries: ctx.tries,
    client_ip: ctx.clientIp,
    started_at: ctx.startedAtMs,
    workspace: workspaceId,
    source: ctx.response?.source === 'service' ? 'service' : 'kong',
  };
  // Only present for an authenticated request (kong/pdk/log.lua): build_authenticated_entity reads
  // credential.consumer_id, which a keyauth credential lacks (it has consumer.id), and falls back to
  // ctx.authenticate_consumer (sic), which nothing sets: so Kong 3.9 writes the credential id alone.
  if (ctx.credential) out.authenticated_entity = { id: ctx.credential.id };
  if (ctx.consumer) out.consumer = consumerEntity(ctx.consumer);
  // `var.upstream_status or ctx.buffered_status or ""` (kong/pdk/log.lua): every try, "" when none was made.
  out.upstream_status = ctx.upstreamStatuses?.length
    ? ctx.upstreamStatuses.join(', ')
    : ctx.upstreamStatus !== null
      ? String(ctx.upstreamStatus)
      : '';
  for (const [k, v] of Object.entries(ctx.serializeExtras)) setDotted(out, k, v);
  return out;
}

function setDotted(obj: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split('.');
  let cur = obj;
  for (const p of parts.slice(0, -1)) {
    const next = cur[p];
    if (typeof next !== 'object' || next === null) cur[p] = {};
    cur = cur[p] as Record<string, unknown>;
  }
  cur[parts[parts.length - 1]!] = value;
}

/** A consumer as Kong's DAO returns it (cjson: unset fields absent); credentials are separate entities. */
export function consumerEntity(c: ConsumerEntity): Record<string, unknown> {
  const out: Record<string, unknown> = { id: c.id, created_at: c.createdAt, updated_at: c.createdAt };
  if (c.username !== null) out.username = c.username;
  if (c.customId !== null) out.custom_id = c.customId;
  if (c.tags !== null) out.tags = c.tags;
  return out;
}

/** A keyauth credential as the DAO returns it: the consumer as a foreign key `{ id }`. */
export function credentialEntity(c: KeyAuthCredential): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: c.id,
    created_at: c.createdAt,
    consumer: { id: c.consumerId },
    key: c.key,
  };
  if (c.tags !== null) out.tags = c.tags;
  return out;
}

/**
 * A consumer group as Kong Gateway Enterprise's get_groups_by_consumer returns it: the entity plus
 * `consumers_count` (consumer_groups_helpers.lua).
 */
export function consumerGroupEntity(g: ConsumerGroupEntity): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: g.id,
    created_at: g.createdAt,
    updated_at: g.createdAt,
    name: g.name,
    consumers_count: g.consumerIds.length,
  };
  if (g.tags !== null) out.tags = g.tags;
  return out;
}
