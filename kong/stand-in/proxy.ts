// The proxying half of Kong: the request to the balancer target, the response streamed back (SSE).
import {
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { RequestContext } from './request-context.js';

/**
 * The proxying half of Kong: send the (buffered) request to the balancer target, stream the response back
 * as it arrives (SSE intact: headers flushed at once, every chunk written through, nothing buffered),
 * retry connection failures on the same target up to `retries` (nginx only retries a POST if nothing was
 * sent), and answer Kong's own 502/504 bodies when the upstream fails before responding.
 */

/** RFC 9110 §7.6.1 hop-by-hop headers, never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export const KONG_VERSION_TAG = 'kong/3.9.3';

/**
 * One of nginx's proxy buffers (its default, a 4 KiB page; Kong's template sets none) on Kong's buffered
 * location: with a route's `response_buffering` on, Kong's default, nginx passes the body on a full buffer
 * at a time and the rest when the upstream is done (`proxy_buffering on`). Only `response_buffering: false`
 * (the @unbuffered_response location) streams an SSE answer as it comes.
 */
export const NGINX_PROXY_BUFFER_BYTES = 4096;

function dropHopByHop(
  headers: Map<string, string[]> | Record<string, string | string[] | undefined>,
): Record<string, string[]> {
  const entries: [string, string[]][] =
    headers instanceof Map
      ? [...headers.entries()]
      : Object.entries(headers)
          .filter((e): e is [string, string | string[]] => e[1] !== undefined)
          .map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v : [v]]);
  const listed = new Set<string>();
  for (const [k, v] of entries)
    if (k === 'connection') for (const t of v.join(',').split(',')) listed.add(t.trim().toLowerCase());
  const out: Record<string, string[]> = {};
  for (const [k, v] of entries) if (!HOP_BY_HOP.has(k) && !listed.has(k)) out[k] = v;
  return out;
}

/** Kong's default error messages (kong/tools/http.lua get_default_exit_body). */
const KONG_ERROR_MESSAGES: Record<number, string> = {
  404: 'no Route matched with those values',
  500: 'An unexpected error occurred',
  502: 'An invalid response was received from the upstream server',
  503: 'Service unavailable',
  504: 'The upstream server is timed out',
};

export function sendKongError(
  res: ServerResponse,
  ctx: RequestContext | null,
  status: number,
  message?: string,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({
    message: message ?? KONG_ERROR_MESSAGES[status] ?? 'An unexpected error occurred',
    ...(ctx ? { request_id: ctx.id } : {}),
  });
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    server: KONG_VERSION_TAG,
    ...(ctx ? { 'x-kong-request-id': ctx.id } : {}),
  });
  res.end(body);
}

const RETRYABLE = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

interface AttemptError {
  kind: 'attempt_error';
  status: 502 | 504;
  retryable: boolean;
  message: string;
}

/** Proxies the request described by `ctx`; resolves once the response to the client has finished. */
export async function proxyToUpstream(
  ctx: RequestContext,
  res: ServerResponse,
  kongPort: number,
): Promise<void> {
  const target = ctx.target ?? { host: ctx.service.host, port: ctx.service.port };
  const defaultPort = ctx.service.protocol === 'https' ? 443 : 80;
  const headers: Record<string, string[]> = dropHopByHop(ctx.headers);
  // Host is $upstream_host: the router sets it for preserve_host, set_target / set_header('host') overwrite it
  // later in access; empty, it is the balancer's host with any non-default port (runloop/handler.lua
  // access.after, runloop/balancer/init.lua set_host_header).
  headers.host = [
    ctx.upstreamHost ??
      (ctx.service.port === defaultPort ? ctx.service.host : `${ctx.service.host}:${ctx.service.port}`),
  ];
  const xff = ctx.headers.get('x-forwarded-for')?.[0];
  headers['x-forwarded-for'] = [xff ? `${xff}, ${ctx.clientIp}` : ctx.clientIp];
  headers['x-forwarded-proto'] = [ctx.scheme];
  headers['x-forwarded-host'] = [ctx.host];
  headers['x-forwarded-port'] = [String(kongPort)];
  headers['x-forwarded-path'] = [ctx.path];
  headers['x-real-ip'] = [ctx.clientIp];
  headers['x-kong-request-id'] = [ctx.id];
  const body = ctx.upstreamBody ?? ctx.body;
  headers['content-length'] = [String(body.length)];
  if (body.length === 0 && (ctx.upstreamMethod === 'GET' || ctx.upstreamMethod === 'HEAD'))
    delete headers['content-length'];
  const path = ctx.upstreamPath + (ctx.upstreamQuery ? `?${ctx.upstreamQuery}` : '');
  const send = ctx.service.protocol === 'https' ? httpsRequest : httpRequest;

  const attempt = (): Promise<IncomingMessage | AttemptError> =>
    new Promise((resolve) => {
      const balancerStart = Date.now();
      const t0 = performance.now();
      ctx.marks.balancerEnd = t0 - ctx.startedAtPerf;
      const tryRec = {
        ip: target.host,
        port: target.port,
        balancer_start: balancerStart,
        balancer_latency: 0,
      };
      ctx.tries.push(tryRec);
      let connected = false;
      let settled = false;
      const settle = (v: IncomingMessage | AttemptError): void => {
        if (settled) return;
        settled = true;
        // nginx's $upstream_status: 502 for a failed connection, 504 for a timeout, else the answer's status.
        (ctx.upstreamStatuses ??= []).push(isAttemptError(v) ? v.status : (v.statusCode ?? 502));
        resolve(v);
      };
      const req = send({
        host: target.host,
        port: target.port,
        method: ctx.upstreamMethod,
        path,
        headers: { ...headers, host: headers.host![0]! } as OutgoingHttpHeaders,
        agent: false,
        timeout: ctx.timeouts.connectMs,
        servername: ctx.service.protocol === 'https' ? target.host : undefined,
      });
      req.on('socket', (s) => {
        s.once('connect', () => {
          connected = true;
          s.setTimeout(ctx.timeouts.readMs);
        });
      });
      req.on('timeout', () => {
        req.destroy();
        settle({
          kind: 'attempt_error',
          status: 504,
          retryable: !connected,
          message: connected ? 'upstream read timeout' : 'upstream connect timeout',
        });
      });
      req.on('error', (e: NodeJS.ErrnoException) => {
        settle({
          kind: 'attempt_error',
          status: 502,
          retryable: !connected && RETRYABLE.has(e.code ?? ''),
          message: `upstream ${connected ? 'error' : 'connect failed'}: ${e.code ?? e.message}`,
        });
      });
      req.on('response', (up) => settle(up));
      req.end(body);
    });

  let up: IncomingMessage | AttemptError = await attempt();
  for (let retry = 0; retry < ctx.retries && isAttemptError(up) && up.retryable; retry++) {
    // Kong.balancer on a retry records the previous try's get_last_failure() (kong/init.lua).
    Object.assign(ctx.tries[ctx.tries.length - 1]!, { state: 'failed', code: up.status });
    up = await attempt();
  }
  // header_filter: the last try is marked only when the answer is a 5xx and no retry is left
  // (runloop/handler.lua header_filter.before), whether Kong or the upstream produced it.
  const finalStatus = isAttemptError(up) ? up.status : (up.statusCode ?? 502);
  if (finalStatus > 499 && ctx.tries.length > ctx.retries)
    Object.assign(ctx.tries[ctx.tries.length - 1]!, { state: 'failed', code: finalStatus });

  if (isAttemptError(up)) {
    ctx.marks.headers = performance.now() - ctx.startedAtPerf;
    ctx.response = { status: up.status, headers: {}, size: 0, source: 'error' };
    sendKongError(res, ctx, up.status);
    ctx.marks.end = performance.now() - ctx.startedAtPerf;
    return;
  }

  const upstream = up;
  ctx.marks.headers = performance.now() - ctx.startedAtPerf;
  ctx.upstreamStatus = upstream.statusCode ?? 502;
  const out = dropHopByHop(upstream.headers);
  const upstreamLatency = Math.round(ctx.marks.headers - (ctx.marks.balancerEnd ?? 0));
  const proxyLatency = Math.round(ctx.marks.balancerEnd ?? 0);
  out['x-kong-upstream-latency'] = [String(upstreamLatency)];
  out['x-kong-proxy-latency'] = [String(proxyLatency)];
  out.via = [`1.1 ${KONG_VERSION_TAG}`];
  out['x-kong-request-id'] = [ctx.id];
  mergeAccessHeaders(out, ctx);
  ctx.response = { status: ctx.upstreamStatus, headers: flatten(out), size: 0, source: 'service' };
  res.writeHead(ctx.upstreamStatus, out);
  res.flushHeaders();

  const buffered = ctx.route.responseBuffering;
  let held: Buffer[] = [];
  let heldBytes = 0;
  await new Promise<void>((resolve) => {
    upstream.on('data', (chunk: Buffer) => {
      ctx.response!.size += chunk.length;
      let out = chunk;
      if (buffered) {
        held.push(chunk);
        heldBytes += chunk.length;
        const full = heldBytes - (heldBytes % NGINX_PROXY_BUFFER_BYTES);
        if (full === 0) return;
        const all = Buffer.concat(held, heldBytes);
        out = all.subarray(0, full);
        held = full < heldBytes ? [all.subarray(full)] : [];
        heldBytes -= full;
      }
      // Pause only when the client cannot keep up (backpressure).
      if (!res.write(out)) {
        upstream.pause();
        res.once('drain', () => upstream.resume());
      }
    });
    upstream.on('end', () => {
      if (heldBytes > 0) res.write(Buffer.concat(held, heldBytes));
      res.end();
      ctx.marks.end = performance.now() - ctx.startedAtPerf;
      resolve();
    });
    upstream.on('error', () => {
      res.destroy();
      ctx.marks.end = performance.now() - ctx.startedAtPerf;
      resolve();
    });
    res.on('close', () => {
      if (!upstream.complete) {
        upstream.destroy();
        ctx.marks.end ??= performance.now() - ctx.startedAtPerf;
        resolve();
      }
    });
  });
}

function isAttemptError(v: IncomingMessage | AttemptError): v is AttemptError {
  return (v as AttemptError).kind === 'attempt_error';
}

function flatten(h: Record<string, string[]>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) out[k] = v.length === 1 ? v[0]! : v;
  return out;
}

/** Headers nginx takes from the upstream over one set in access (single-valued in headers_out). */
const UPSTREAM_WINS = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'last-modified',
  'location',
  'server',
  'date',
  'via',
  'x-kong-request-id',
  'x-kong-upstream-latency',
  'x-kong-proxy-latency',
]);

/**
 * ngx.header set in access (kong.response.set_header, rate-limiting's headers) reaches the proxied answer:
 * nginx copies the upstream's headers after it, so an ordinary header the upstream also sends goes out
 * with both values (access first); single-valued ones keep the upstream's.
 */
function mergeAccessHeaders(out: Record<string, string[]>, ctx: RequestContext): void {
  if (!ctx.responseHeaders) return;
  for (const [lower, h] of ctx.responseHeaders) {
    if (UPSTREAM_WINS.has(lower) && out[lower]) continue;
    out[lower] = [...h.values, ...(out[lower] ?? [])];
  }
}
