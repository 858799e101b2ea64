// The subset of Kong's declarative config (format 3.0) the stand-in serves, parsed and checked.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { KinferenceError } from '../../src/core/errors.js';

/**
 * The subset of Kong's declarative config (`_format_version: "3.0"`, the file users give decK or
 * KONG_DECLARATIVE_CONFIG) the stand-in serves: services (url or protocol/host/port/path, retries, timeouts),
 * routes (paths, methods, hosts, strip_path, preserve_host, response_buffering) nested or top-level,
 * consumers with their key-auth credentials, consumer groups (Kong Gateway Enterprise 3.4+) with their members,
 * and plugins on a route, a service, a consumer, a consumer group or global. Defaults are Kong's
 * (kong/db/schema/entities/*.lua, kong/plugins/key-auth/daos.lua).
 */

export interface ServiceEntity {
  id: string;
  name: string;
  protocol: 'http' | 'https';
  host: string;
  port: number;
  path: string | null;
  retries: number;
  connectTimeoutMs: number;
  writeTimeoutMs: number;
  readTimeoutMs: number;
  enabled: boolean;
}

export interface RouteEntity {
  id: string;
  name: string | null;
  serviceId: string | null;
  paths: string[];
  methods: string[] | null;
  hosts: string[] | null;
  stripPath: boolean;
  preserveHost: boolean;
  responseBuffering: boolean;
  requestBuffering: boolean;
  regexPriority: number;
}

export interface PluginEntity {
  id: string;
  name: string;
  instanceName: string | null;
  routeId: string | null;
  serviceId: string | null;
  consumerId?: string | null;
  consumerGroupId?: string | null;
  enabled: boolean;
  /** The user's config as written; defaults are filled from the plugin's schema later. */
  config: Record<string, unknown>;
}

/** A consumer as Kong stores it (kong/db/schema/entities/consumers.lua): username or custom_id required. */
export interface ConsumerEntity {
  id: string;
  username: string | null;
  customId: string | null;
  tags: string[] | null;
  /** auto_timestamp_s: seconds, set when the config is loaded (DB-less). */
  createdAt: number;
}

/** A key-auth credential (kong/plugins/key-auth/daos.lua keyauth_credentials). */
export interface KeyAuthCredential {
  id: string;
  consumerId: string;
  key: string;
  tags: string[] | null;
  createdAt: number;
}

/** A consumer group (Kong Gateway Enterprise 3.4+, consumer_groups.lua) and the consumers in it. */
export interface ConsumerGroupEntity {
  id: string;
  name: string;
  tags: string[] | null;
  createdAt: number;
  consumerIds: string[];
}

export interface DeclarativeConfig {
  formatVersion: string;
  workspaceId: string;
  services: ServiceEntity[];
  routes: RouteEntity[];
  plugins: PluginEntity[];
  consumers: ConsumerEntity[];
  keyauthCredentials: KeyAuthCredential[];
  consumerGroups: ConsumerGroupEntity[];
}

type Obj = Record<string, unknown>;

function bad(where: string, msg: string): never {
  throw new KinferenceError('KINF_ERR_CONFIG', `kong declarative config: ${where}: ${msg}`);
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Kong-style deterministic ids for entities declared without one (stable across restarts). */
export function entityId(kind: string, key: string): string {
  const h = createHash('sha1').update(`${kind}:${key}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function str(o: Obj, k: string, where: string): string | null {
  const v = o[k];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') bad(where, `${k} must be a string`);
  return v;
}

function int(o: Obj, k: string, where: string, def: number, min: number, max: number): number {
  const v = o[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    bad(where, `${k} must be an integer between ${min} and ${max}`);
  return v;
}

function bool(o: Obj, k: string, where: string, def: boolean): boolean {
  const v = o[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'boolean') bad(where, `${k} must be a boolean`);
  return v;
}

function strList(o: Obj, k: string, where: string): string[] | null {
  const v = o[k];
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) bad(where, `${k} must be a list of strings`);
  return v as string[];
}

const ALLOWED = {
  top: [
    '_format_version',
    '_transform',
    '_workspace',
    'services',
    'routes',
    'plugins',
    'upstreams',
    'consumers',
    'consumer_groups',
    'keyauth_credentials',
  ],
  consumer: [
    'id',
    'username',
    'custom_id',
    'tags',
    'created_at',
    'updated_at',
    'keyauth_credentials',
    'plugins',
    'groups',
  ],
  credential: ['id', 'key', 'tags', 'created_at', 'ttl', 'consumer'],
  group: ['id', 'name', 'tags', 'created_at', 'updated_at', 'consumers', 'plugins'],
};

/** Kong's other credential and consumer-child entities: real in Kong, not served by the stand-in. */
const UNSERVED_CHILDREN = [
  'basicauth_credentials',
  'hmacauth_credentials',
  'jwt_secrets',
  'oauth2_credentials',
  'acls',
  'mtls_auth_credentials',
];

function onlyKeys(o: Obj, allowed: string[], where: string): void {
  for (const k of Object.keys(o)) {
    if (allowed.includes(k)) continue;
    if (UNSERVED_CHILDREN.includes(k))
      bad(where, `${k}: Kong entity not served by the stand-in (only key-auth)`);
    bad(where, `${k}: unknown field`);
  }
}

/** declarative_config.lua's wording for a second entity with the same unique value. */
function duplicate(entity: string, key: string, value: string): never {
  bad(entity, `uniqueness violation: '${entity}' entity with ${key} set to '${value}' already declared`);
}

function tags(o: Obj, where: string): string[] | null {
  return strList(o, 'tags', where);
}

function parseService(o: Obj, idx: number): ServiceEntity {
  const where = `services[${idx}]${typeof o.name === 'string' ? ` (${o.name})` : ''}`;
  const name = str(o, 'name', where) ?? bad(where, 'name is required (routes and plugins refer to it)');
  let protocol = str(o, 'protocol', where) ?? 'http';
  let host = str(o, 'host', where);
  let port: number | null = o.port === undefined ? null : int(o, 'port', where, 80, 0, 65535);
  let path = str(o, 'path', where);
  const url = str(o, 'url', where);
  if (url !== null) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      bad(where, `url is not a URL: ${url}`);
    }
    protocol = u.protocol.replace(/:$/, '');
    host = u.hostname.replace(/^\[|\]$/g, '');
    port = u.port ? Number(u.port) : protocol === 'https' ? 443 : 80;
    path = u.pathname === '/' && !url.replace(/^[a-z]+:\/\/[^/]+/i, '').startsWith('/') ? null : u.pathname;
  }
  if (protocol !== 'http' && protocol !== 'https')
    bad(where, `protocol ${protocol} is not served by the stand-in`);
  if (host === null) bad(where, 'url or host is required');
  return {
    id: str(o, 'id', where) ?? entityId('services', name),
    name,
    protocol,
    host,
    port: port ?? (protocol === 'https' ? 443 : 80),
    path,
    retries: int(o, 'retries', where, 5, 0, 32767),
    connectTimeoutMs: int(o, 'connect_timeout', where, 60000, 1, 2147483646),
    writeTimeoutMs: int(o, 'write_timeout', where, 60000, 1, 2147483646),
    readTimeoutMs: int(o, 'read_timeout', where, 60000, 1, 2147483646),
    enabled: bool(o, 'enabled', where, true),
  };
}

function parseRoute(o: Obj, where: string, serviceId: string | null): RouteEntity {
  const name = str(o, 'name', where);
  const paths = strList(o, 'paths', where) ?? [];
  for (const p of paths)
    if (!p.startsWith('/') && !p.startsWith('~')) bad(where, `path ${p} must start with / or ~`);
  const methods = strList(o, 'methods', where);
  const hosts = strList(o, 'hosts', where);
  if (paths.length === 0 && !methods && !hosts) bad(where, 'a route needs paths, methods or hosts');
  return {
    id: str(o, 'id', where) ?? entityId('routes', name ?? `${serviceId}:${paths.join(',')}`),
    name,
    serviceId,
    paths,
    methods: methods?.map((m) => m.toUpperCase()) ?? null,
    hosts: hosts?.map((h) => h.toLowerCase()) ?? null,
    stripPath: bool(o, 'strip_path', where, true),
    preserveHost: bool(o, 'preserve_host', where, false),
    responseBuffering: bool(o, 'response_buffering', where, true),
    requestBuffering: bool(o, 'request_buffering', where, true),
    regexPriority: int(o, 'regex_priority', where, 0, -2147483648, 2147483647),
  };
}

interface PluginScope {
  routeId: string | null;
  serviceId: string | null;
  consumerId?: string | null;
  consumerGroupId?: string | null;
}

function parsePlugin(o: Obj, where: string, scope: PluginScope): PluginEntity {
  const name = str(o, 'name', where) ?? bad(where, 'name is required');
  const config = o.config === undefined || o.config === null ? {} : o.config;
  if (!isObj(config)) bad(where, 'config must be a map');
  const instanceName = str(o, 'instance_name', where);
  return {
    id:
      str(o, 'id', where) ??
      entityId(
        'plugins',
        `${name}:${scope.routeId}:${scope.serviceId}:${instanceName}` +
          (scope.consumerId || scope.consumerGroupId ? `:${scope.consumerId}:${scope.consumerGroupId}` : ''),
      ),
    name: name.toLowerCase(),
    instanceName,
    routeId: scope.routeId,
    serviceId: scope.serviceId,
    consumerId: scope.consumerId ?? null,
    consumerGroupId: scope.consumerGroupId ?? null,
    enabled: bool(o, 'enabled', where, true),
    config,
  };
}

function list(v: unknown, where: string): Obj[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => !isObj(x))) bad(where, 'must be a list of maps');
  return v as Obj[];
}

export function parseDeclarative(doc: unknown, source = 'kong.yaml'): DeclarativeConfig {
  if (!isObj(doc)) bad(source, 'top level must be a map');
  const fv = doc._format_version;
  if (fv !== '3.0' && fv !== '2.1' && fv !== '1.1')
    bad(source, `_format_version must be "3.0" (or "2.1", "1.1"), got ${JSON.stringify(fv)}`);
  for (const k of Object.keys(doc))
    if (!ALLOWED.top.includes(k))
      bad(source, `unknown top-level key ${k} (the stand-in serves ${ALLOWED.top.join(', ')})`);

  const services: ServiceEntity[] = [];
  const routes: RouteEntity[] = [];
  const plugins: PluginEntity[] = [];
  const serviceByName = new Map<string, ServiceEntity>();
  const now = Math.floor(Date.now() / 1000);
  const people = parseConsumers(doc, now);
  plugins.push(...people.plugins);

  list(doc.services, 'services').forEach((so, i) => {
    const svc = parseService(so, i);
    if (serviceByName.has(svc.name)) bad(`services[${i}]`, `duplicate service name ${svc.name}`);
    services.push(svc);
    serviceByName.set(svc.name, svc);
    list(so.routes, `services[${i}].routes`).forEach((ro, j) => {
      const where = `services[${i}].routes[${j}]`;
      const route = parseRoute(ro, where, svc.id);
      routes.push(route);
      list(ro.plugins, `${where}.plugins`).forEach((po, k) =>
        plugins.push(parsePlugin(po, `${where}.plugins[${k}]`, { routeId: route.id, serviceId: null })),
      );
    });
    list(so.plugins, `services[${i}].plugins`).forEach((po, k) =>
      plugins.push(parsePlugin(po, `services[${i}].plugins[${k}]`, { routeId: null, serviceId: svc.id })),
    );
  });

  const ref = (v: unknown, where: string): ServiceEntity | null => {
    if (v === undefined || v === null) return null;
    const name = typeof v === 'string' ? v : isObj(v) ? (v.name ?? v.id) : undefined;
    const svc =
      typeof name === 'string' ? (serviceByName.get(name) ?? services.find((s) => s.id === name)) : undefined;
    if (!svc) bad(where, `service ${JSON.stringify(v)} is not declared`);
    return svc;
  };

  list(doc.routes, 'routes').forEach((ro, j) => {
    const where = `routes[${j}]`;
    const svc = ref(ro.service, where);
    const route = parseRoute(ro, where, svc?.id ?? null);
    routes.push(route);
    list(ro.plugins, `${where}.plugins`).forEach((po, k) =>
      plugins.push(parsePlugin(po, `${where}.plugins[${k}]`, { routeId: route.id, serviceId: null })),
    );
  });

  list(doc.plugins, 'plugins').forEach((po, k) => {
    const where = `plugins[${k}]`;
    let routeId: string | null = null;
    if (po.route !== undefined && po.route !== null) {
      const r = po.route;
      const key = typeof r === 'string' ? r : isObj(r) ? (r.name ?? r.id) : undefined;
      const route = routes.find((x) => x.name === key || x.id === key);
      if (!route) bad(where, `route ${JSON.stringify(r)} is not declared`);
      routeId = route.id;
    }
    const svc = ref(po.service, where);
    const consumer =
      po.consumer === undefined || po.consumer === null ? null : people.consumer(po.consumer, where);
    const group =
      po.consumer_group === undefined || po.consumer_group === null
        ? null
        : people.group(po.consumer_group, where);
    plugins.push(
      parsePlugin(po, where, {
        routeId,
        serviceId: svc?.id ?? null,
        consumerId: consumer?.id ?? null,
        consumerGroupId: group?.id ?? null,
      }),
    );
  });

  const seen = new Set<string>();
  for (const p of plugins) {
    const key = `${p.name}:${p.routeId}:${p.serviceId}:${p.consumerId}:${p.consumerGroupId}`;
    if (seen.has(key))
      bad(
        'plugins',
        `plugin ${p.name} is configured twice on the same route/service/consumer/consumer group/global scope`,
      );
    seen.add(key);
  }
  const ws = doc._workspace;
  return {
    formatVersion: fv,
    workspaceId: entityId('workspaces', typeof ws === 'string' ? ws : 'default'),
    services,
    routes,
    plugins,
    consumers: people.consumers,
    keyauthCredentials: people.credentials,
    consumerGroups: people.groups,
  };
}

/**
 * consumers (with nested keyauth_credentials, plugins and decK's `groups: [{name}]`), consumer_groups (with
 * decK's `consumers: [{username}]` and plugins) and top-level keyauth_credentials (`consumer:` by id or
 * username), checked for Kong's uniqueness rules: username, custom_id, key and group name.
 */
function parseConsumers(doc: Obj, now: number) {
  const consumers: ConsumerEntity[] = [];
  const credentials: KeyAuthCredential[] = [];
  const groups: ConsumerGroupEntity[] = [];
  const plugins: PluginEntity[] = [];
  const lookup = (v: unknown, where: string): ConsumerEntity => {
    const key = typeof v === 'string' ? v : isObj(v) ? (v.id ?? v.username ?? v.custom_id) : undefined;
    const c =
      typeof key === 'string'
        ? consumers.find((x) => x.id === key || x.username === key || x.customId === key)
        : undefined;
    if (!c) bad(where, `consumer ${JSON.stringify(v)} is not declared`);
    return c;
  };
  const lookupGroup = (v: unknown, where: string): ConsumerGroupEntity => {
    const key = typeof v === 'string' ? v : isObj(v) ? (v.id ?? v.name) : undefined;
    const g = typeof key === 'string' ? groups.find((x) => x.id === key || x.name === key) : undefined;
    if (!g) bad(where, `consumer_group ${JSON.stringify(v)} is not declared`);
    return g;
  };
  const addCredential = (o: Obj, where: string, consumerId: string): void => {
    onlyKeys(o, ALLOWED.credential, where);
    // key: auto = true (daos.lua): Kong generates one when it is left out.
    const key = str(o, 'key', where) ?? randomBytes(16).toString('hex');
    if (credentials.some((c) => c.key === key)) duplicate('keyauth_credentials', 'key', key);
    credentials.push({
      id: str(o, 'id', where) ?? entityId('keyauth_credentials', key),
      consumerId,
      key,
      tags: tags(o, where),
      createdAt: now,
    });
  };
  const memberships: { consumerId: string; group: unknown; where: string }[] = [];

  list(doc.consumers, 'consumers').forEach((o, i) => {
    const where = `consumers[${i}]`;
    onlyKeys(o, ALLOWED.consumer, where);
    const username = str(o, 'username', where);
    const customId = str(o, 'custom_id', where);
    if (username === null && customId === null)
      bad(where, "at least one of these fields must be non-empty: 'custom_id', 'username'");
    if (username !== null && consumers.some((c) => c.username === username))
      duplicate('consumers', 'username', username);
    if (customId !== null && consumers.some((c) => c.customId === customId))
      duplicate('consumers', 'custom_id', customId);
    const c: ConsumerEntity = {
      id: str(o, 'id', where) ?? entityId('consumers', username ?? `custom_id:${customId}`),
      username,
      customId,
      tags: tags(o, where),
      createdAt: now,
    };
    if (consumers.some((x) => x.id === c.id)) duplicate('consumers', 'id', c.id);
    consumers.push(c);
    list(o.keyauth_credentials, `${where}.keyauth_credentials`).forEach((co, k) =>
      addCredential(co, `${where}.keyauth_credentials[${k}]`, c.id),
    );
    list(o.groups, `${where}.groups`).forEach((go, k) =>
      memberships.push({ consumerId: c.id, group: go, where: `${where}.groups[${k}]` }),
    );
  });

  list(doc.consumer_groups, 'consumer_groups').forEach((o, i) => {
    const where = `consumer_groups[${i}]`;
    onlyKeys(o, ALLOWED.group, where);
    const name = str(o, 'name', where) ?? bad(where, 'name: required field missing');
    if (groups.some((g) => g.name === name)) duplicate('consumer_groups', 'name', name);
    const g: ConsumerGroupEntity = {
      id: str(o, 'id', where) ?? entityId('consumer_groups', name),
      name,
      tags: tags(o, where),
      createdAt: now,
      consumerIds: [],
    };
    groups.push(g);
    list(o.consumers, `${where}.consumers`).forEach((co, k) => {
      const c = lookup(co, `${where}.consumers[${k}]`);
      if (!g.consumerIds.includes(c.id)) g.consumerIds.push(c.id);
    });
  });
  for (const m of memberships) {
    const g = lookupGroup(m.group, m.where);
    if (!g.consumerIds.includes(m.consumerId)) g.consumerIds.push(m.consumerId);
  }

  list(doc.keyauth_credentials, 'keyauth_credentials').forEach((o, i) => {
    const where = `keyauth_credentials[${i}]`;
    if (o.consumer === undefined || o.consumer === null) bad(where, 'consumer: required field missing');
    addCredential(o, where, lookup(o.consumer, where).id);
  });

  // Plugins nested in a consumer or a group, after every group is known.
  list(doc.consumers, 'consumers').forEach((o, i) =>
    list(o.plugins, `consumers[${i}].plugins`).forEach((po, k) =>
      plugins.push(
        parsePlugin(po, `consumers[${i}].plugins[${k}]`, {
          routeId: null,
          serviceId: null,
          consumerId: consumers[i]!.id,
        }),
      ),
    ),
  );
  list(doc.consumer_groups, 'consumer_groups').forEach((o, i) =>
    list(o.plugins, `consumer_groups[${i}].plugins`).forEach((po, k) =>
      plugins.push(
        parsePlugin(po, `consumer_groups[${i}].plugins[${k}]`, {
          routeId: null,
          serviceId: null,
          consumerGroupId: groups[i]!.id,
        }),
      ),
    ),
  );
  return { consumers, credentials, groups, plugins, consumer: lookup, group: lookupGroup };
}

export function loadDeclarative(path: string): DeclarativeConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new KinferenceError('KINF_ERR_CONFIG_FILE', `cannot read Kong config ${path}: ${String(e)}`, {
      cause: e,
    });
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new KinferenceError('KINF_ERR_CONFIG_FILE', `cannot parse Kong config ${path}: ${String(e)}`, {
      cause: e,
    });
  }
  return parseDeclarative(doc, path);
}
