import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { entityId, loadDeclarative, parseDeclarative } from '../../../kong/stand-in/declarative.js';
import { matchRoute, upstreamPath } from '../../../kong/stand-in/route-match.js';

const FIXTURE = join(import.meta.dirname, '../../fixtures/kong/kong.yaml');

describe('declarative config (kong.yaml)', () => {
  const cfg = loadDeclarative(FIXTURE);

  it('reads services with Kong defaults and the url split into parts', () => {
    const [vllm, admin] = cfg.services;
    expect(vllm).toMatchObject({
      name: 'vllm',
      protocol: 'http',
      host: 'vllm-fallback.llm.svc',
      port: 8000,
      path: null,
      retries: 0,
      readTimeoutMs: 600000,
      connectTimeoutMs: 60000,
    });
    expect(admin).toMatchObject({ host: 'admin.internal', port: 9000, path: '/api', retries: 5 });
  });

  it('reads nested and top-level routes with their flags', () => {
    const chat = cfg.routes.find((r) => r.name === 'chat')!;
    expect(chat).toMatchObject({
      methods: ['POST'],
      stripPath: false,
      responseBuffering: false,
      preserveHost: false,
    });
    const health = cfg.routes.find((r) => r.name === 'health')!;
    expect(health.serviceId).toBe(cfg.services[1]!.id);
    expect(health.stripPath).toBe(true); // Kong's default
  });

  it('scopes plugins to their route, service or globally, with stable ids', () => {
    const k = cfg.plugins.find((p) => p.name === 'kinference')!;
    expect(k.routeId).toBe(cfg.routes.find((r) => r.name === 'chat')!.id);
    expect(k.config).toMatchObject({ tokenizer: 'tiktoken:o200k_base' });
    const prom = cfg.plugins.find((p) => p.name === 'prometheus')!;
    expect([prom.routeId, prom.serviceId]).toEqual([null, null]);
    expect(loadDeclarative(FIXTURE).plugins.map((p) => p.id)).toEqual(cfg.plugins.map((p) => p.id));
    expect(entityId('x', 'y')).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
  });

  it('rejects what Kong would reject, naming the place', () => {
    expect(() => parseDeclarative({ services: [] })).toThrow(/_format_version/);
    expect(() => parseDeclarative({ _format_version: '3.0', services: [{ url: 'http://x' }] })).toThrow(
      /services\[0\].*name is required/,
    );
    expect(() =>
      parseDeclarative({
        _format_version: '3.0',
        services: [{ name: 's', url: 'http://x', routes: [{ paths: ['v1'] }] }],
      }),
    ).toThrow(/must start with \/ or ~/);
    expect(() =>
      parseDeclarative({ _format_version: '3.0', routes: [{ paths: ['/x'], service: 'nope' }] }),
    ).toThrow(/not declared/);
    expect(() =>
      parseDeclarative({ _format_version: '3.0', services: [{ name: 's', url: 'http://x', retries: -1 }] }),
    ).toThrow(/retries/);
    expect(() => parseDeclarative({ _format_version: '3.0', nonsense: 1 })).toThrow(
      /unknown top-level key nonsense/,
    );
    expect(() =>
      parseDeclarative({ _format_version: '3.0', plugins: [{ name: 'p' }, { name: 'p' }] }),
    ).toThrow(/configured twice/);
  });
});

describe('route matching', () => {
  const cfg = parseDeclarative({
    _format_version: '3.0',
    services: [
      {
        name: 's',
        url: 'http://up:8000/base/',
        routes: [
          { name: 'short', paths: ['/v1'] },
          { name: 'long', paths: ['/v1/chat'], methods: ['POST'], strip_path: false },
          { name: 'host', paths: ['/v1/chat'], hosts: ['api.example.com'] },
          { name: 'regex', paths: ['~/v1/models/[a-z]+$'], regex_priority: 5 },
        ],
      },
    ],
  });
  const m = (method: string, path: string, host = 'gw') => matchRoute(cfg, method, host, path);

  it('prefers regex routes, then the longest prefix, then the more specific route', () => {
    expect(m('GET', '/v1/models/abc')?.route.name).toBe('regex');
    expect(m('POST', '/v1/chat/completions')?.route.name).toBe('long');
    expect(m('GET', '/v1/chat/completions')?.route.name).toBe('short');
    expect(m('GET', '/v1/chat/x', 'api.example.com:8000')?.route.name).toBe('host');
    expect(m('GET', '/v2')).toBeNull();
  });

  it('builds the upstream path from the service path and strip_path', () => {
    expect(m('GET', '/v1/x/y')?.upstreamPath).toBe('/base/x/y');
    expect(m('POST', '/v1/chat/completions')?.upstreamPath).toBe('/base/v1/chat/completions');
    const route = cfg.routes[0]!;
    expect(upstreamPath(null, route, '/v1', '/v1')).toBe('/');
    expect(upstreamPath('/api', route, '/v1/z', '/v1')).toBe('/api/z');
    expect(upstreamPath('/api', route, '/v1z', '/v1')).toBe('/api/z');
  });

  it('keeps or drops a trailing slash as Kong’s v0 path join does (router/utils.lua)', () => {
    const strip = cfg.routes[0]!;
    const keep = { ...strip, stripPath: false };
    // strip_path: nothing after the prefix → the service path, with a slash only if the request ended with one
    expect(upstreamPath('/api/', strip, '/v1', '/v1')).toBe('/api');
    expect(upstreamPath('/api/', strip, '/v1/', '/v1/')).toBe('/api/');
    expect(upstreamPath('/api', strip, '/v1/', '/v1/')).toBe('/api/');
    expect(upstreamPath('/api', strip, '/v1/', '/v1')).toBe('/api/');
    expect(upstreamPath('/api/', strip, '/v1/x', '/v1')).toBe('/api/x');
    expect(upstreamPath('/api/', strip, '/v1x', '/v1')).toBe('/api/x');
    expect(upstreamPath(null, strip, '/v1/', '/v1')).toBe('/');
    // no strip_path: the whole request path after the service path
    expect(upstreamPath('/api/', keep, '/v1/x', '/v1')).toBe('/api/v1/x');
    expect(upstreamPath('/api', keep, '/', '/')).toBe('/api');
    expect(upstreamPath('/api', keep, '/v1/', '/v1')).toBe('/api/v1/');
  });
});
