// A chat route, its service and the access-phase request context the stand-in builds for a POST through it.
import { entityId, type RouteEntity, type ServiceEntity } from '../kong/stand-in/declarative.js';
import type { RequestContext } from '../kong/stand-in/request-context.js';

/**
 * A `POST /v1/chat/completions` route named `name` and its service (`host`:8000, no retries, Kong's default
 * timeouts), as Kong's declarative config would give them: for driving a plugin server's events directly.
 */
export function chatRoute(name: string, host: string): { route: RouteEntity; service: ServiceEntity } {
  const service: ServiceEntity = {
    id: entityId('services', name),
    name,
    protocol: 'http',
    host,
    port: 8000,
    path: null,
    retries: 0,
    connectTimeoutMs: 60000,
    writeTimeoutMs: 60000,
    readTimeoutMs: 600000,
    enabled: true,
  };
  const route: RouteEntity = {
    id: entityId('routes', name),
    name,
    serviceId: service.id,
    paths: ['/v1/chat/completions'],
    methods: ['POST'],
    hosts: null,
    stripPath: false,
    preserveHost: false,
    responseBuffering: false,
    requestBuffering: true,
    regexPriority: 0,
  };
  return { route, service };
}

/**
 * An access-phase request context as the stand-in builds one for a chat POST through `route` (for driving a
 * plugin server's events directly: warm-ups and bench:plugin).
 */
export function chatRequestContext(
  id: string,
  body: Buffer,
  route: RouteEntity,
  service: ServiceEntity,
): RequestContext {
  return {
    id,
    startedAtMs: Date.now(),
    startedAtPerf: performance.now(),
    method: 'POST',
    path: '/v1/chat/completions',
    rawQuery: '',
    scheme: 'http',
    host: 'kong',
    port: 8000,
    clientIp: '127.0.0.1',
    httpVersion: 1.1,
    bodyBufferBytes: 8 << 20,
    headers: new Map([
      ['host', ['kong:8000']],
      ['content-type', ['application/json']],
      ['content-length', [String(body.length)]],
    ]),
    body,
    route,
    service,
    target: null,
    upstreamHost: null,
    upstreamMethod: 'POST',
    upstreamPath: '/v1/chat/completions',
    upstreamQuery: '',
    upstreamBody: null,
    retries: 0,
    timeouts: { connectMs: 60000, writeMs: 60000, readMs: 600000 },
    ctxShared: new Map(),
    serializeExtras: {},
    tries: [],
    response: null,
    upstreamStatus: null,
    marks: {},
  };
}
