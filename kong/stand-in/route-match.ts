// Route matching as Kong's router does it (prefixes, regex paths, methods) and the upstream path.
import type { DeclarativeConfig, RouteEntity, ServiceEntity } from './declarative.js';

/**
 * Route matching the way Kong's router does for the cases the stand-in serves (format 3.0): plain paths are
 * prefixes, `~` paths are regexes (tried first, by regex_priority); among prefixes the longest wins; methods
 * and hosts (without port) must match when set.
 */

export interface RouteMatch {
  route: RouteEntity;
  service: ServiceEntity | null;
  /** The part of the request path the route matched (stripped when strip_path is on). */
  matchedPath: string;
  /** Path sent upstream, before the query string. */
  upstreamPath: string;
}

interface Candidate {
  route: RouteEntity;
  matched: string;
  regex: boolean;
}

function matchPath(route: RouteEntity, path: string): Candidate | null {
  if (route.paths.length === 0) return { route, matched: '', regex: false };
  let best: Candidate | null = null;
  for (const p of route.paths) {
    if (p.startsWith('~')) {
      const m = new RegExp(`^${p.slice(1).replace(/^\^/, '')}`).exec(path);
      if (m && (!best || !best.regex)) best = { route, matched: m[0], regex: true };
    } else if (path.startsWith(p) && (!best || (!best.regex && p.length > best.matched.length))) {
      best = { route, matched: p, regex: false };
    }
  }
  return best;
}

/**
 * Kong's path join for path_handling "v0" (kong/router/utils.lua get_upstream_uri_v0): the service path
 * (default "/") joined with the request path, or with what follows the matched prefix when strip_path is
 * on; a trailing slash of the request is kept when nothing follows the prefix.
 */
export function upstreamPath(
  servicePath: string | null,
  route: RouteEntity,
  requestPath: string,
  matched: string,
): string {
  const base = servicePath ?? '/';
  const postfix = requestPath.slice(matched.length);
  if (base.endsWith('/')) {
    if (!route.stripPath) return base + requestPath.slice(1);
    if (postfix === '') {
      if (base === '/') return '/';
      return requestPath.endsWith('/') ? base : base.slice(0, -1);
    }
    return postfix.startsWith('/') ? base.slice(0, -1) + postfix : base + postfix;
  }
  if (!route.stripPath) return requestPath === '/' ? base : base + requestPath;
  if (postfix === '') return requestPath.length > 1 && requestPath.endsWith('/') ? `${base}/` : base;
  return postfix.startsWith('/') ? base + postfix : `${base}/${postfix}`;
}

export function matchRoute(
  cfg: DeclarativeConfig,
  method: string,
  host: string | undefined,
  path: string,
): RouteMatch | null {
  const bareHost = host?.replace(/:\d+$/, '').toLowerCase();
  const candidates: Candidate[] = [];
  for (const route of cfg.routes) {
    if (route.methods && !route.methods.includes(method.toUpperCase())) continue;
    if (route.hosts && (!bareHost || !route.hosts.includes(bareHost))) continue;
    const c = matchPath(route, path);
    if (c) candidates.push(c);
  }
  if (candidates.length === 0) return null;
  candidates.sort((a, b) => {
    if (a.regex !== b.regex) return a.regex ? -1 : 1;
    if (a.regex) return b.route.regexPriority - a.route.regexPriority;
    if (a.matched.length !== b.matched.length) return b.matched.length - a.matched.length;
    // More specific routes (with methods/hosts) win ties, as in Kong's categories.
    const spec = (r: RouteEntity): number => (r.methods ? 1 : 0) + (r.hosts ? 2 : 0);
    return spec(b.route) - spec(a.route);
  });
  const best = candidates[0]!;
  const service = cfg.services.find((s) => s.id === best.route.serviceId) ?? null;
  return {
    route: best.route,
    service,
    matchedPath: best.matched,
    upstreamPath: upstreamPath(service?.path ?? null, best.route, path, best.matched),
  };
}
