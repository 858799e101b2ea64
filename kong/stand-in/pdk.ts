// Kong's PDK functions on the stand-in's side of the bridge, with Kong's argument and phase checks.
import { STATUS_CODES } from 'node:http';
import type { PdkHandler, PdkOutcome } from './bridge.js';
import { AuthenticateError, authenticate, loadConsumer } from './authenticate.js';
import type { ConsumerEntity, DeclarativeConfig, KeyAuthCredential, PluginEntity } from './declarative.js';
import {
  consumerEntity,
  consumerGroupEntity,
  credentialEntity,
  headerFirst,
  headersAsLua,
  requestUri,
  serialize,
  type RequestContext,
} from './request-context.js';
import { getUriArgs, normalizePath } from './uri-args.js';

/**
 * Kong's PDK functions, run on the stand-in's side of the bridge, with Kong's argument checks (a bad argument
 * is a Lua error → the event is abandoned and the client gets 500) and phase checks. Only functions a router
 * plugin plausibly uses are implemented; any other method is answered with nil and logged, like Kong's
 * "could not find pdk method" (for methods Kong has but the stand-in lacks, the log says so).
 */

export type Phase = 'access' | 'log';
export type LogLevel = 'debug' | 'info' | 'notice' | 'warn' | 'err' | 'crit' | 'alert' | 'emerg';

export interface PdkEnv {
  phase: Phase;
  plugin: PluginEntity;
  workspaceId: string;
  nodeId: string;
  hostname: string;
  /** The loaded config: load_consumer and authenticate look consumers up in it. */
  config?: DeclarativeConfig;
  log(level: LogLevel, msg: string): void;
}

class LuaError extends Error {}

function luaToString(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** msgpack str and bin both become Lua strings. */
function luaStr(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
  return undefined;
}

function headerName(v: unknown, fn: string): string {
  const s = luaStr(v);
  if (s === undefined) throw new LuaError(`${fn}: header name must be a string`);
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(s)) throw new LuaError(`${fn}: invalid header name "${s}"`);
  return s.toLowerCase();
}

function headerValues(v: unknown, fn: string, name: string): string[] {
  const text = (x: unknown, invalid: () => string): string => {
    const s = luaStr(x);
    if (s === undefined) throw new LuaError(invalid());
    return s.replace(/[\r\n]+/g, ' ');
  };
  // validate_header(s): numbers and booleans are fine alone, but an array must hold only strings
  // (kong/pdk/private/checks.lua).
  if (Array.isArray(v))
    return v.map((x) =>
      text(x, () => `${fn}: invalid header value in array "${name}": got ${luaType(x)}, expected string`),
    );
  if (typeof v === 'number' || typeof v === 'boolean') return [String(v)];
  return [
    text(
      v,
      () =>
        `${fn}: invalid header value for "${name}": got ${typeof v}, expected array of string, string, number or boolean`,
    ),
  ];
}

function luaType(x: unknown): string {
  if (x === null || x === undefined) return 'nil';
  if (Array.isArray(x) || typeof x === 'object') return 'table';
  return typeof x;
}

function isInt(v: unknown, lo: number, hi: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;
}

const ACCESS_ONLY = new Set([
  'kong.request.get_raw_body',
  'kong.request.get_body',
  'kong.service.set_target',
  'kong.service.set_retries',
  'kong.service.set_timeouts',
  'kong.service.set_upstream',
  'kong.service.request.set_header',
  'kong.service.request.add_header',
  'kong.service.request.clear_header',
  'kong.service.request.set_headers',
  'kong.service.request.set_path',
  'kong.service.request.set_raw_query',
  'kong.service.request.set_method',
  'kong.service.request.set_raw_body',
  'kong.response.exit',
  'kong.response.error',
  'kong.response.set_header',
  'kong.response.add_header',
  'kong.response.set_headers',
  'kong.response.clear_header',
  'kong.client.authenticate',
]);

/** Kong's kong.response.exit body/headers handling: a table body is JSON-encoded with a JSON content type. */
function exitOutcome(status: number, body: unknown, headers: unknown, fn: string): PdkOutcome {
  const h: Record<string, string[]> = {};
  if (headers !== undefined && headers !== null) {
    if (typeof headers !== 'object' || Array.isArray(headers))
      throw new LuaError(`${fn}: headers must be a table`);
    for (const [k, v] of Object.entries(headers)) h[headerName(k, fn)] = headerValues(v, fn, k);
  }
  let bytes: Uint8Array | null = null;
  if (body !== undefined && body !== null) {
    const s = luaStr(body);
    if (s !== undefined) bytes = Buffer.from(s);
    else if (typeof body === 'object') {
      bytes = Buffer.from(JSON.stringify(body));
      h['content-type'] ??= ['application/json; charset=utf-8'];
    } else throw new LuaError(`${fn}: body must be a nil, string or table`);
  }
  return { kind: 'exit', status, body: bytes, headers: h };
}

/**
 * Kong runs an external plugin's `log` in a timer (native_timer_at) with a snapshot of the request
 * (runloop/plugin_servers/plugin.lua build_phases). exposed_api answers from that snapshot; every other PDK
 * function that reads ngx.var or ngx.req raises there ("API disabled in the context of ngx.timer", kong#8598).
 */
const NO_REQUEST_IN_TIMER = new Set([
  'kong.request.get_method',
  'kong.request.get_path',
  'kong.request.get_raw_path',
  'kong.request.get_path_with_query',
  'kong.request.get_raw_query',
  'kong.request.get_query',
  'kong.request.get_query_arg',
  'kong.request.get_scheme',
  'kong.request.get_host',
  'kong.request.get_port',
  'kong.request.get_http_version',
  'kong.client.get_ip',
  'kong.client.get_forwarded_ip',
  'kong.nginx.get_var',
]);

export class StandInPdk implements PdkHandler {
  readonly #ctx: RequestContext;
  readonly #env: PdkEnv;

  constructor(ctx: RequestContext, env: PdkEnv) {
    this.#ctx = ctx;
    this.#env = env;
  }

  call(method: string, args: unknown[]): PdkOutcome {
    try {
      if (ACCESS_ONLY.has(method) && this.#env.phase !== 'access')
        throw new LuaError(`${method}: function cannot be called in ${this.#env.phase} phase`);
      if (NO_REQUEST_IN_TIMER.has(method) && this.#env.phase === 'log')
        throw new LuaError(`${method}: API disabled in the context of ngx.timer`);
      return this.#dispatch(method, args);
    } catch (e) {
      if (e instanceof LuaError) return { kind: 'error', message: e.message };
      throw e;
    }
  }

  #setHeader(name: string, values: string[]): void {
    const ctx = this.#ctx;
    if (name === 'host') ctx.upstreamHost = values[0] ?? null;
    ctx.headers.set(name, values);
  }

  /** ngx.header[name] = value (set) or one more line of it (add), as the client will receive it. */
  #responseHeader(lower: string, given: string, values: string[], add: boolean): void {
    const headers = (this.#ctx.responseHeaders ??= new Map());
    const prev = headers.get(lower);
    headers.set(lower, {
      name: prev?.name ?? given,
      values: add && prev ? [...prev.values, ...values] : values,
    });
  }

  #dispatch(method: string, a: unknown[]): PdkOutcome {
    const ctx = this.#ctx;
    const value = (v: unknown): PdkOutcome => ({ kind: 'value', value: v });
    const nil: PdkOutcome = { kind: 'value', value: undefined };
    switch (method) {
      // ---- kong.request
      case 'kong.request.get_raw_body': {
        // A body over the buffer went to a temp file. Kong reads it back only when given
        // max_allowed_file_size ≥ 0 and the file is within it (0: any size); otherwise Lua returns nil, err
        // and fix_raw(nil) raises while packing (kong/pdk/request.lua, mp_rpc.lua).
        if (ctx.body.length <= ctx.bodyBufferBytes) return { kind: 'raw', value: ctx.body };
        const max = typeof a[0] === 'number' ? a[0] : -1;
        if (max < 0)
          throw new LuaError(
            "request body did not fit into client body buffer, consider raising 'client_body_buffer_size'",
          );
        if (max > 0 && ctx.body.length > max)
          throw new LuaError(`request body file too big: ${ctx.body.length} > ${max}`);
        return { kind: 'raw', value: ctx.body };
      }
      case 'kong.request.get_header': {
        const name = luaStr(a[0]);
        if (name === undefined) throw new LuaError('header name must be a string');
        return value(headerFirst(ctx.headers, name.replace(/_/g, '-')));
      }
      case 'kong.request.get_headers': {
        // In the log timer exposed_api returns the saved ngx.req.get_headers(): 100 lines, the argument ignored.
        if (this.#env.phase === 'log') return { kind: 'multimap', value: headersAsLua(ctx.headers) };
        if (a[0] !== undefined && a[0] !== null && !isInt(a[0], 1, 1000))
          throw new LuaError('max_headers must be a number between 1 and 1000');
        return {
          kind: 'multimap',
          value: headersAsLua(ctx.headers, typeof a[0] === 'number' ? a[0] : undefined),
        };
      }
      case 'kong.request.get_method':
        return value(ctx.method);
      case 'kong.request.get_path':
        return value(normalizePath(ctx.rawPath ?? ctx.path));
      case 'kong.request.get_raw_path':
        return value(ctx.rawPath ?? ctx.path);
      case 'kong.request.get_path_with_query':
        return value(requestUri(ctx));
      case 'kong.request.get_query': {
        const max = a[0];
        if (max !== undefined && max !== null) {
          if (typeof max !== 'number') throw new LuaError('max_args must be a number');
          if (max < 1) throw new LuaError('max_args must be >= 1');
          if (max > 1000) throw new LuaError('max_args must be <= 1000');
        }
        return {
          kind: 'multimap',
          value: getUriArgs(ctx.rawQuery, typeof max === 'number' ? max : undefined),
        };
      }
      case 'kong.request.get_query_arg': {
        const name = luaStr(a[0]);
        if (name === undefined) throw new LuaError('query argument name must be a string');
        const v = getUriArgs(ctx.rawQuery)[name];
        return value(Array.isArray(v) ? v[0] : v);
      }
      case 'kong.request.get_raw_query':
        return value(ctx.rawQuery);
      case 'kong.request.get_scheme':
        return value(ctx.scheme);
      case 'kong.request.get_host':
        return value(ctx.host);
      case 'kong.request.get_port':
        return value(ctx.port);
      case 'kong.request.get_http_version':
        return value(ctx.httpVersion);
      case 'kong.request.get_start_time':
        return value(ctx.startedAtMs);
      case 'kong.client.get_ip':
      case 'kong.client.get_forwarded_ip':
        return value(ctx.clientIp);

      // ---- kong.service
      case 'kong.service.set_target': {
        const host = luaStr(a[0]);
        if (host === undefined) throw new LuaError('host must be a string');
        if (!isInt(a[1], 0, 65535)) throw new LuaError('port must be an integer');
        ctx.target = { host, port: a[1] };
        ctx.upstreamHost = host; // balancer sets ngx.var.upstream_host = host (no port), kong.md §7 #15
        return nil;
      }
      case 'kong.service.set_retries':
        if (!isInt(a[0], 0, 32767)) throw new LuaError('retries must be an integer between 0 and 32767');
        ctx.retries = a[0];
        return nil;
      case 'kong.service.set_timeouts': {
        const [c, w, r] = a;
        for (const [n, v] of [
          ['connect', c],
          ['write', w],
          ['read', r],
        ] as const)
          if (!isInt(v, 1, 2147483646))
            throw new LuaError(`${n}_timeout must be an integer between 1 and 2147483646`);
        ctx.timeouts = { connectMs: c as number, writeMs: w as number, readMs: r as number };
        return nil;
      }
      case 'kong.service.request.set_header': {
        const name = headerName(a[0], method);
        if (a[1] === undefined || a[1] === null)
          throw new LuaError(`${method}: invalid header value for "${name}": got nil`);
        this.#setHeader(name, headerValues(a[1], method, name));
        return nil;
      }
      case 'kong.service.request.add_header': {
        const name = headerName(a[0], method);
        const prev = ctx.headers.get(name) ?? [];
        this.#setHeader(name, [...prev, ...headerValues(a[1], method, name)]);
        return nil;
      }
      case 'kong.service.request.clear_header': {
        const name = headerName(a[0], method);
        // ngx.req.clear_header only: $upstream_host, which becomes the Host sent, is left as it is.
        ctx.headers.delete(name);
        return nil;
      }
      case 'kong.service.request.set_headers': {
        const t = a[0];
        if (typeof t !== 'object' || t === null || Array.isArray(t))
          throw new LuaError('headers must be a table');
        for (const [k, v] of Object.entries(t)) {
          const name = headerName(k, method);
          this.#setHeader(name, headerValues(v, method, k));
        }
        return nil;
      }
      case 'kong.service.request.set_path': {
        const p = luaStr(a[0]);
        if (p === undefined || !p.startsWith('/')) throw new LuaError('path must start with /');
        ctx.upstreamPath = p;
        return nil;
      }
      case 'kong.service.request.set_raw_query': {
        const q = luaStr(a[0]);
        if (q === undefined) throw new LuaError('query must be a string');
        ctx.upstreamQuery = q;
        return nil;
      }
      case 'kong.service.request.set_method': {
        const m = luaStr(a[0]);
        if (m === undefined || !/^[A-Z]+$/.test(m)) throw new LuaError('invalid method');
        ctx.upstreamMethod = m;
        return nil;
      }
      case 'kong.service.request.set_raw_body': {
        const b =
          a[0] instanceof Uint8Array
            ? Buffer.from(a[0])
            : typeof a[0] === 'string'
              ? Buffer.from(a[0])
              : null;
        if (b === null) throw new LuaError('body must be a string');
        ctx.upstreamBody = b;
        return nil;
      }

      // ---- kong.response
      case 'kong.response.exit': {
        if (!isInt(a[0], 100, 599)) throw new LuaError('code must be a number between 100 and 599');
        return exitOutcome(a[0], a[1], a[2], method);
      }
      case 'kong.response.error': {
        if (!isInt(a[0], 400, 599)) throw new LuaError('code must be an integer and be between 400 and 599');
        const msg = luaStr(a[1]) ?? STATUS_CODES[a[0]] ?? 'An unexpected error occurred';
        return exitOutcome(a[0], { message: msg }, a[2], method);
      }
      case 'kong.response.get_status':
        return value(ctx.response?.status ?? 200);
      case 'kong.response.get_header': {
        const name = luaStr(a[0])?.toLowerCase();
        const v = name === undefined ? undefined : ctx.response?.headers[name];
        return value(Array.isArray(v) ? v[0] : v);
      }
      case 'kong.response.get_headers':
        return { kind: 'multimap', value: { ...(ctx.response?.headers ?? {}) } };
      case 'kong.response.get_source':
        return value(ctx.response?.source === 'service' ? 'service' : ctx.response ? 'exit' : 'error');

      case 'kong.response.set_header':
      case 'kong.response.add_header': {
        const given = luaStr(a[0]);
        const name = headerName(a[0], method);
        if (a[1] === undefined || a[1] === null)
          throw new LuaError(`${method}: invalid header value for "${given}": got nil`);
        const values = headerValues(a[1], method, given ?? name);
        if (name === 'transfer-encoding' || name === 'transfer_encoding') {
          this.#env.log('warn', 'manually setting Transfer-Encoding. Ignored.');
          return nil;
        }
        this.#responseHeader(name, given!, values, method === 'kong.response.add_header');
        return nil;
      }
      case 'kong.response.set_headers': {
        const t = a[0];
        if (typeof t !== 'object' || t === null || Array.isArray(t))
          throw new LuaError('headers must be a table');
        const all = Object.entries(t).map(
          ([k, v]) => [k, headerName(k, method), headerValues(v, method, k)] as const,
        );
        for (const [given, name, values] of all) {
          if (name === 'transfer-encoding' || name === 'transfer_encoding')
            this.#env.log('warn', 'manually setting Transfer-Encoding. Ignored.');
          else this.#responseHeader(name, given, values, false);
        }
        return nil;
      }
      case 'kong.response.clear_header': {
        const name = luaStr(a[0]);
        if (name === undefined) throw new LuaError('header name must be a string');
        ctx.responseHeaders?.delete(name.toLowerCase());
        return nil;
      }

      // ---- kong.client: the authenticated consumer (ngx.ctx.authenticated_*, kept into the log timer)
      case 'kong.client.get_consumer':
        return value(ctx.consumer ? consumerEntity(ctx.consumer) : undefined);
      case 'kong.client.get_credential':
        return value(ctx.credential ? credentialEntity(ctx.credential) : undefined);
      case 'kong.client.get_consumer_groups':
        return value(ctx.consumerGroups ? ctx.consumerGroups.map(consumerGroupEntity) : undefined);
      case 'kong.client.load_consumer': {
        const id = luaStr(a[0]);
        if (id === undefined) throw new LuaError('consumer_id must be a string');
        const byName = a[1] !== undefined && a[1] !== null && a[1] !== false;
        if (!UUID.test(id) && !byName)
          throw new LuaError('cannot load a consumer with an id that is not a uuid');
        const c = this.#env.config ? loadConsumer(this.#env.config, id, byName) : null;
        return value(c ? consumerEntity(c) : undefined);
      }
      case 'kong.client.authenticate': {
        const [consumer, credential] = a;
        const table = (v: unknown): boolean => v === undefined || v === null || typeof v === 'object';
        if (!table(consumer)) throw new LuaError('consumer must be a table or nil');
        if (!table(credential)) throw new LuaError('credential must be a table or nil');
        try {
          authenticate(
            ctx,
            this.#env.config ?? ({ consumerGroups: [] } as unknown as DeclarativeConfig),
            consumerFromLua(consumer),
            credentialFromLua(credential, consumer),
          );
        } catch (e) {
          if (e instanceof AuthenticateError) throw new LuaError(e.message);
          throw e;
        }
        return nil;
      }

      // ---- kong.ctx.shared (exposed_api in plugin.lua)
      case 'kong.ctx.shared.get': {
        const k = luaStr(a[0]);
        return value(k === undefined ? undefined : ctx.ctxShared.get(k));
      }
      case 'kong.ctx.shared.set': {
        const k = luaStr(a[0]);
        if (k === undefined) throw new LuaError('key must be a string');
        if (a[1] === undefined || a[1] === null) ctx.ctxShared.delete(k);
        else ctx.ctxShared.set(k, a[1]);
        return nil;
      }

      // ---- kong.log
      case 'kong.log.serialize':
        if (this.#env.phase !== 'log')
          throw new LuaError('kong.log.serialize: function cannot be called in access phase');
        return value(JSON.stringify(serialize(ctx, this.#env.workspaceId)));
      case 'kong.log.set_serialize_value': {
        const k = luaStr(a[0]);
        if (k === undefined) throw new LuaError('key must be a string');
        // In the log timer the serializer output was already saved (and Kong's own loggers ran): no effect.
        if (this.#env.phase !== 'log') ctx.serializeExtras[k] = a[1] ?? null;
        return nil;
      }
      case 'kong.log.debug':
      case 'kong.log.info':
      case 'kong.log.notice':
      case 'kong.log.warn':
      case 'kong.log.err':
      case 'kong.log.crit':
      case 'kong.log.alert':
      case 'kong.log.emerg':
        this.#env.log(method.slice('kong.log.'.length) as LogLevel, a.map(luaToString).join(''));
        return nil;

      // ---- kong.nginx / plugin / node / router
      case 'kong.nginx.get_var': {
        const name = luaStr(a[0]);
        const vars: Record<string, string | undefined> = {
          kong_request_id: ctx.id,
          request_uri: requestUri(ctx),
          upstream_host: ctx.upstreamHost ?? undefined,
          request_method: ctx.method,
          remote_addr: ctx.clientIp,
          host: ctx.host,
        };
        return value(name === undefined ? undefined : vars[name]);
      }
      case 'kong.nginx.req_start_time':
        return value(ctx.startedAtMs / 1000);
      case 'kong.plugin.get_id':
        return value(this.#env.plugin.id);
      case 'kong.node.get_id':
        return value(this.#env.nodeId);
      case 'kong.node.get_hostname':
        return value(this.#env.hostname);
      case 'kong.router.get_route':
        return value({ id: ctx.route.id, name: ctx.route.name, paths: ctx.route.paths });
      case 'kong.router.get_service':
        return value({
          id: ctx.service.id,
          name: ctx.service.name,
          host: ctx.service.host,
          port: ctx.service.port,
        });
    }
    this.#env.log('err', `could not find pdk method: ${method} (not implemented by the Kong stand-in)`);
    return nil;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A consumer table a plugin passed to kong.client.authenticate, kept in the entity's shape. */
function consumerFromLua(v: unknown): ConsumerEntity | null {
  if (typeof v !== 'object' || v === null) return null;
  const o = v as Record<string, unknown>;
  return {
    id: luaStr(o.id) ?? '',
    username: luaStr(o.username) ?? null,
    customId: luaStr(o.custom_id) ?? null,
    tags: Array.isArray(o.tags) ? o.tags.map((t) => String(t)) : null,
    createdAt: typeof o.created_at === 'number' ? o.created_at : 0,
  };
}

function credentialFromLua(v: unknown, consumer: unknown): KeyAuthCredential | null {
  if (typeof v !== 'object' || v === null) return null;
  const o = v as Record<string, unknown>;
  const c = o.consumer as Record<string, unknown> | undefined;
  return {
    id: luaStr(o.id) ?? '',
    consumerId: luaStr(c?.id) ?? luaStr((consumer as Record<string, unknown> | null)?.id) ?? '',
    key: luaStr(o.key) ?? '',
    tags: null,
    createdAt: typeof o.created_at === 'number' ? o.created_at : 0,
  };
}
