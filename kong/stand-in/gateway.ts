// The Kong stand-in's HTTP gateway: route match, plugin phases over the real RPC, proxy, log phase.
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { KinferenceError } from '../../src/core/errors.js';
import type { EventResult, PdkHandler } from './bridge.js';
import {
  loadDeclarative,
  parseDeclarative,
  type DeclarativeConfig,
  type PluginEntity,
} from './declarative.js';
import { bundledPlugins, type BundledPlugin } from './bundled-plugins.js';
import { ExternalPlugin, StartInstanceError, type HandleOutcome } from './external-plugin.js';
import { StandInPdk, type LogLevel, type Phase } from './pdk.js';
import { defaultPluginsDir, jsPluginServerDef, pluginServersFromEnv } from './plugin-server-defs.js';
import { PluginServerProcess, queryPlugin, type Logger, type PluginServerDef } from './plugin-server.js';
import { KONG_VERSION_TAG, proxyToUpstream, sendKongError } from './proxy.js';
import { matchRoute } from './route-match.js';
import { splitRequestTarget } from './uri-args.js';
import type { HeaderMap, RequestContext } from './request-context.js';

/**
 * The Kong stand-in: an HTTP gateway that serves a Kong declarative config with external (plugin-server)
 * plugins run over the real RPC, as Kong 3.9 does. Per request: match a route, buffer the body
 * (request_buffering), run every applicable external plugin's `access` in priority order through the bridge,
 * proxy to the target the plugins set (streaming), then run `log` after the response, off the request path.
 */

export interface GatewayEvent {
  plugin: string;
  phase: Phase;
  requestId: string;
  outcome: HandleOutcome;
  /** Wall time of the phase as the gateway waited for it: the plugin's work and every RPC round trip. */
  ms: number;
}

export interface GatewayOptions {
  /** Path of a kong.yaml, or an already parsed config. */
  kongConfig: string | DeclarativeConfig | Record<string, unknown>;
  host?: string;
  /** 0 picks a free port. Default 8000 (Kong's proxy port). */
  port?: number;
  /** Explicit plugin servers; default: Kong's env keys if KONG_PLUGINSERVER_NAMES is set, else kinference. */
  pluginServers?: PluginServerDef[];
  /** Directory of the bundled kinference plugin (default dist/plugins/kinference). */
  pluginsDir?: string;
  /** Where the plugin server's socket goes (default: a fresh temp dir). */
  prefix?: string;
  logger?: Logger;
  rpcTimeoutMs?: number;
  /**
   * nginx client_body_buffer_size in bytes. Kong's default is 8k; deployments of this plugin must raise it to
   * their largest body (docs/plugin.md), so the stand-in defaults to KONG_NGINX_HTTP_CLIENT_BODY_BUFFER_SIZE
   * when set, else 8 MiB. Bodies above it make get_raw_body fail as in Kong (500).
   */
  clientBodyBufferBytes?: number;
  /** How long start waits for the plugin servers' sockets (default 20 s; a loaded machine needs more). */
  pluginServerReadyMs?: number;
  /** Called after every plugin event (tests count PDK round trips with it). */
  onEvent?: (e: GatewayEvent) => void;
  /**
   * Fault injection for tests: return an error string to answer that PDK call with plugin.StepError, which
   * makes the plugin's pending PDK promise reject (real Kong never sends StepError today).
   */
  injectStepError?: (method: string, phase: Phase) => string | null;
  /**
   * Fault injection for tests: return true to skip a request's log phase, as Kong does when the worker that
   * ran its access phase dies before the log timer fires.
   */
  dropLogPhase?: (requestId: string) => boolean;
}

export interface Gateway {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly plugins: ReadonlyMap<string, ExternalPlugin>;
  /** Resolves when every plugin server accepts connections (again, after a respawn). */
  pluginServersReady(timeoutMs?: number): Promise<void>;
  /** Resolves when all log phases started so far have finished. */
  idle(): Promise<void>;
  /**
   * Serves a new declarative config from the next request on, as Kong rebuilds its router and plugins on a
   * DB-less config push or `kong reload`: every external plugin gets a new `__seq__`, so its next event starts
   * a new instance (StartInstance with the new config) and closes the old one. A config that does not load or
   * validate is refused (KINF_ERR_CONFIG) and the old one keeps serving. Plugin servers are not restarted.
   */
  reload(kongConfig: string | DeclarativeConfig | Record<string, unknown>): void;
  close(): Promise<void>;
}

const LEVELS: Record<string, number> = {
  debug: 0,
  info: 1,
  notice: 2,
  warn: 3,
  err: 4,
  crit: 5,
  alert: 6,
  emerg: 7,
};

export function stderrLogger(minLevel: keyof typeof LEVELS = 'notice'): Logger {
  const min = LEVELS[minLevel] ?? 2;
  return (level, msg) => {
    if ((LEVELS[level] ?? 4) < min) return;
    const ts = new Date().toISOString().replace('T', ' ').slice(0, 19);
    process.stderr.write(`${ts} [${level}] ${msg}\n`);
  };
}

function socketAccepts(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** nginx size syntax: 8k, 4m, 1g or bytes. */
export function parseSize(v: string | undefined): number | undefined {
  const m = /^\s*(\d+)\s*([kKmMgG]?)\s*$/.exec(v ?? '');
  if (!m) return undefined;
  const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g'];
  return Number(m[1]) * unit;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function loadConfig(c: string | DeclarativeConfig | Record<string, unknown>): DeclarativeConfig {
  if (typeof c === 'string') return loadDeclarative(c);
  return 'formatVersion' in c ? (c as DeclarativeConfig) : parseDeclarative(c);
}

/** A plugin entity bound to what runs it: a plugin server (external) or the stand-in itself (bundled). */
type BoundPlugin = { entity: PluginEntity; conf: Record<string, unknown>; priority: number } & (
  { ext: ExternalPlugin; bundled?: undefined } | { ext?: undefined; bundled: BundledPlugin }
);

/** Per connection: bytesRead when its last request's body ended (keep-alive requests take turns). */
const readMark = new WeakMap<Socket, number>();

const compoundKey = (r?: string | null, s?: string | null, c?: string | null, g?: string | null): string =>
  `${r ?? ''}:${s ?? ''}:${c ?? ''}:${g ?? ''}`;

/**
 * plugins_iterator.lua lookup_cfg, Kong Gateway Enterprise's order (OSS 3.9's without the group steps):
 * consumer+route+service, group+route+service, consumer+route, consumer+service, group+route,
 * group+service, route+service, consumer, group, route, service, global; groups in the order given.
 */
export function lookupPlugin<T extends { entity: PluginEntity }>(
  bound: T[],
  name: string,
  routeId: string,
  serviceId: string,
  consumerId: string | undefined,
  groups: readonly { id: string }[] | null | undefined,
): T | undefined {
  const combos = new Map<string, T>();
  for (const b of bound)
    if (b.entity.name === name)
      combos.set(
        compoundKey(b.entity.routeId, b.entity.serviceId, b.entity.consumerId, b.entity.consumerGroupId),
        b,
      );
  if (combos.size === 0) return undefined;
  const r = routeId;
  const s = serviceId;
  const c = consumerId;
  const gs = groups ?? [];
  const tries: string[] = [];
  if (c) tries.push(compoundKey(r, s, c));
  for (const g of gs) tries.push(compoundKey(r, s, null, g.id));
  if (c) tries.push(compoundKey(r, null, c), compoundKey(null, s, c));
  for (const g of gs) tries.push(compoundKey(r, null, null, g.id));
  for (const g of gs) tries.push(compoundKey(null, s, null, g.id));
  tries.push(compoundKey(r, s));
  if (c) tries.push(compoundKey(null, null, c));
  for (const g of gs) tries.push(compoundKey(null, null, null, g.id));
  tries.push(compoundKey(r), compoundKey(null, s), compoundKey());
  for (const k of tries) {
    const hit = combos.get(k);
    if (hit) return hit;
  }
  return undefined;
}

export async function startGateway(opts: GatewayOptions): Promise<Gateway> {
  const log = opts.logger ?? stderrLogger();
  let cfg = loadConfig(opts.kongConfig);

  let ownPrefix: string | null = null;
  let defs = opts.pluginServers ?? pluginServersFromEnv();
  if (!defs) {
    const dir = opts.pluginsDir ?? defaultPluginsDir();
    if (!existsSync(join(dir, 'kinference.js')))
      throw new KinferenceError(
        'KINF_ERR_CONFIG',
        `no plugin bundle at ${dir}/kinference.js: run \`npm run build\` first`,
      );
    ownPrefix = opts.prefix ?? mkdtempSync(join(tmpdir(), 'kinf-kong-'));
    defs = [jsPluginServerDef('kinference', dir, ownPrefix)];
  }

  // Kong's init: run every query command; only the first plugin of each is registered (≥ 3.9).
  const plugins = new Map<string, ExternalPlugin>();
  const servers: PluginServerProcess[] = [];
  for (const def of defs) {
    const info = await queryPlugin(def);
    if (plugins.has(info.Name))
      throw new KinferenceError('KINF_ERR_CONFIG', `plugin ${info.Name} is served twice`);
    const proc = new PluginServerProcess(def, log);
    servers.push(proc);
    plugins.set(
      info.Name,
      new ExternalPlugin(info, proc, (l, m) => log(l, `[${info.Name}] ${m}`), opts.rpcTimeoutMs),
    );
  }

  const bundled = bundledPlugins();
  /** Every enabled plugin entity of `c` bound to what runs it; throws on a config a plugin refuses. */
  const bindAll = (c: DeclarativeConfig): BoundPlugin[] => {
    const out: BoundPlugin[] = [];
    for (const entity of c.plugins) {
      if (!entity.enabled) continue;
      const ext = plugins.get(entity.name);
      const own = bundled.get(entity.name);
      if (own?.noConsumer && (entity.consumerId || entity.consumerGroupId))
        throw new KinferenceError(
          'KINF_ERR_CONFIG',
          `schema violation for plugin ${entity.name} (${entity.id}):\n  ` +
            `${entity.consumerId ? 'consumer' : 'consumer_group'}: value must be null`,
        );
      if (ext)
        out.push({ ext, entity, conf: ext.instanceConfig(entity, c.workspaceId), priority: ext.priority });
      else if (own) {
        // get_plugin_config adds the plugin's own scope; rate-limiting keys its counters by it.
        const conf: Record<string, unknown> = { ...own.configure(entity) };
        if (entity.routeId) conf.route_id = entity.routeId;
        if (entity.serviceId) conf.service_id = entity.serviceId;
        if (entity.consumerId) conf.consumer_id = entity.consumerId;
        out.push({ bundled: own, entity, conf, priority: own.priority });
      } else log('warn', `plugin ${entity.name} is not served by any plugin server: ignored by the stand-in`);
    }
    return out;
  };
  let bound: BoundPlugin[];
  try {
    bound = bindAll(cfg);
  } catch (e) {
    for (const p of plugins.values()) p.close();
    throw e;
  }

  /** Plugin names in the order Kong runs them (highest priority first). */
  const runOrder = (): string[] => {
    const prio = new Map<string, number>();
    for (const b of bound) prio.set(b.entity.name, b.priority);
    return [...prio.keys()].sort((a, b) => prio.get(b)! - prio.get(a)!);
  };

  const stopServers = async (): Promise<void> => {
    for (const p of plugins.values()) p.close();
    for (const p of bundled.values()) p.close();
    await Promise.all(servers.map((s) => s.stop()));
    if (ownPrefix && !opts.prefix) rmSync(ownPrefix, { recursive: true, force: true });
  };
  for (const s of servers) s.start();
  const pluginServersReady = async (timeoutMs = 20_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    for (const s of servers) {
      if (!s.def.startCmd) continue;
      while (!(await socketAccepts(s.def.socket))) {
        if (Date.now() > deadline)
          throw new KinferenceError(
            'KINF_ERR_CONFIG',
            `plugin server ${s.def.name} did not listen on ${s.def.socket}`,
          );
        await new Promise((r) => setTimeout(r, 25));
      }
    }
  };
  try {
    await pluginServersReady(opts.pluginServerReadyMs);
  } catch (e) {
    await stopServers();
    throw e;
  }

  const bodyBufferBytes =
    opts.clientBodyBufferBytes ?? parseSize(process.env.KONG_NGINX_HTTP_CLIENT_BODY_BUFFER_SIZE) ?? 8 << 20;
  const nodeId = randomUUID();
  const host = hostname();
  const pendingLogs = new Set<Promise<void>>();
  let listenPort = 0;

  const envFor = (b: BoundPlugin, phase: Phase) => ({
    phase,
    plugin: b.entity,
    workspaceId: cfg.workspaceId,
    nodeId,
    hostname: host,
    config: cfg,
    log: (level: LogLevel, msg: string) =>
      log(
        level === 'crit' || level === 'alert' || level === 'emerg' ? 'err' : level,
        `[${b.entity.name}] ${msg}`,
      ),
  });

  const runPhase = async (
    b: BoundPlugin & { ext: ExternalPlugin },
    ctx: RequestContext,
    phase: Phase,
  ): Promise<HandleOutcome> => {
    const pdk = new StandInPdk(ctx, envFor(b, phase));
    const inject = opts.injectStepError;
    const handler: PdkHandler = inject
      ? {
          call: (method, args) => {
            const fault = inject(method, phase);
            return fault === null ? pdk.call(method, args) : { kind: 'step_error', message: fault };
          },
        }
      : pdk;
    const t0 = performance.now();
    const outcome = await b.ext.handleEvent(b.conf, phase, handler);
    const ms = performance.now() - t0;
    opts.onEvent?.({ plugin: b.entity.name, phase, requestId: ctx.id, outcome, ms });
    return outcome;
  };

  const respondExit = (
    res: ServerResponse,
    ctx: RequestContext,
    exit: NonNullable<EventResult['exit']>,
  ): void => {
    // ngx.header set in access (kong.response.set_header, rate-limiting) stays; the exit's own win.
    const headers: Record<string, string[]> = {};
    for (const h of ctx.responseHeaders?.values() ?? []) headers[h.name] = h.values;
    for (const [k, v] of Object.entries(exit.headers)) {
      for (const name of Object.keys(headers))
        if (name.toLowerCase() === k.toLowerCase()) delete headers[name];
      headers[k] = v;
    }
    const body = exit.body ?? new Uint8Array(0);
    headers['content-length'] = [String(body.length)];
    headers['x-kong-response-latency'] = [String(Math.round(performance.now() - ctx.startedAtPerf))];
    headers.server = [KONG_VERSION_TAG];
    headers['x-kong-request-id'] = [ctx.id];
    ctx.response = {
      status: exit.status,
      headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.length === 1 ? v[0]! : v])),
      size: body.length,
      source: 'exit',
    };
    res.writeHead(exit.status, headers);
    res.end(body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const startedAtPerf = performance.now();
    const startedAtMs = Date.now();
    // nginx takes any target it accepted as it is; new URL(target, base) would read `//x` as a host and
    // throw on some. The path is parsed under a fixed origin instead (never throws, always sendable).
    const { rawPath, rawQuery } = splitRequestTarget(req.url ?? '/');
    const url = new URL(`http://stand-in${rawPath.startsWith('/') ? '' : '/'}${rawPath}?${rawQuery}`);
    const path = url.pathname;
    const match = matchRoute(cfg, req.method ?? 'GET', req.headers.host, path);
    // $bytes_sent and $request_length from the connection's own counters (keep-alive: this request's share).
    const sock = req.socket;
    const writtenBefore = sock.bytesWritten;
    const finished = new Promise<void>((resolve) => {
      res.once('finish', resolve);
      res.once('close', resolve);
    });
    const body = await readBody(req);
    const readBefore = readMark.get(sock) ?? 0;
    readMark.set(sock, sock.bytesRead);
    const requestLength = sock.bytesRead - readBefore;
    if (!match) return sendKongError(res, null, 404);
    if (!match.service) return sendKongError(res, null, 503, 'no Service found with those values');

    const headers: HeaderMap = new Map();
    for (const [k, v] of Object.entries(req.headersDistinct)) if (v) headers.set(k.toLowerCase(), v);
    const ctx: RequestContext = {
      id: randomBytes(16).toString('hex'),
      startedAtMs,
      startedAtPerf,
      method: req.method ?? 'GET',
      path,
      rawPath,
      rawQuery,
      scheme: 'http',
      host: (req.headers.host ?? '').replace(/:\d+$/, ''),
      port: listenPort,
      clientIp: (req.socket.remoteAddress ?? '').replace(/^::ffff:/, ''),
      httpVersion: Number(req.httpVersion),
      headers,
      body,
      bodyBufferBytes,
      route: match.route,
      service: match.service,
      target: null,
      // The router sets upstream_host to the client's Host for preserve_host; plugins may overwrite it.
      upstreamHost: match.route.preserveHost ? (req.headers.host ?? null) : null,
      upstreamMethod: req.method ?? 'GET',
      upstreamPath: match.upstreamPath,
      upstreamQuery: url.search.slice(1),
      upstreamBody: null,
      retries: match.service.retries,
      timeouts: {
        connectMs: match.service.connectTimeoutMs,
        writeMs: match.service.writeTimeoutMs,
        readMs: match.service.readTimeoutMs,
      },
      ctxShared: new Map(),
      serializeExtras: {},
      tries: [],
      response: null,
      upstreamStatus: null,
      marks: {},
      requestLength,
    };

    // Kong's collecting iterator: each plugin's config is looked up when its turn comes, so one scoped to
    // the consumer that an earlier (higher-priority) auth plugin authenticated applies.
    const chain: BoundPlugin[] = [];
    const snapshot = bound;
    let answered = false;
    for (const name of runOrder()) {
      const b = lookupPlugin(
        snapshot,
        name,
        match.route.id,
        match.service.id,
        ctx.consumer?.id,
        ctx.consumerGroups,
      );
      if (!b) continue;
      chain.push(b);
      // After an exit Kong skips the access handlers but still collects the plugins for the log phase.
      if (answered) continue;
      if (b.bundled) {
        if (!b.bundled.access) continue;
        const exit = await b.bundled.access(b.conf, ctx, {
          config: cfg,
          workspaceId: cfg.workspaceId,
          log: envFor(b, 'access').log,
        });
        if (exit) {
          respondExit(res, ctx, exit);
          answered = true;
        }
        continue;
      }
      if (!b.ext.hasPhase('access')) continue;
      let outcome: HandleOutcome;
      try {
        outcome = await runPhase(b, ctx, 'access');
      } catch (e) {
        if (!(e instanceof StartInstanceError)) throw e;
        ctx.response = { status: 500, headers: {}, size: 0, source: 'error' };
        sendKongError(res, ctx, 500);
        answered = true;
        continue;
      }
      if (outcome.kind === 'failed_open') continue;
      const r = outcome.result;
      if (r.end === 'exit' && r.exit) {
        respondExit(res, ctx, r.exit);
        answered = true;
        continue;
      }
      if (r.end === 'pdk_error') {
        log('err', `[${b.entity.name}] ${r.error ?? 'PDK error'}`);
        ctx.response = { status: 500, headers: {}, size: 0, source: 'error' };
        sendKongError(res, ctx, 500);
        answered = true;
        continue;
      }
    }
    ctx.marks.accessEnd = performance.now() - startedAtPerf;
    if (!answered) await proxyToUpstream(ctx, res, listenPort);
    ctx.marks.end ??= performance.now() - startedAtPerf;

    await finished;
    if (ctx.response) ctx.response.size = sock.bytesWritten - writtenBefore;
    if (opts.dropLogPhase?.(ctx.id)) return;
    // Kong runs `log` in a timer after the response, with a snapshot of the request.
    const logging = (async () => {
      for (const b of chain) {
        try {
          if (b.bundled) {
            if (b.bundled.phases.has('log')) b.bundled.log?.(b.conf, ctx, cfg.workspaceId);
            continue;
          }
          if (!b.ext.hasPhase('log')) continue;
          const outcome = await runPhase(b, ctx, 'log');
          // A Lua error in the log timer abandons the event; Kong only logs it.
          if (outcome.kind === 'done' && outcome.result.end === 'pdk_error')
            log('err', `[${b.entity.name}] log phase: ${outcome.result.error ?? 'PDK error'}`);
        } catch (e) {
          log('err', `[${b.entity.name}] log phase: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    })();
    pendingLogs.add(logging);
    void logging.finally(() => pendingLogs.delete(logging));
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      log('err', `stand-in: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      sendKongError(res, null, 500);
    });
  });
  const hostOpt = opts.host ?? '127.0.0.1';
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 8000, hostOpt, () => resolve());
    });
  } catch (e) {
    await stopServers();
    throw e;
  }
  const addr = server.address();
  listenPort = typeof addr === 'object' && addr ? addr.port : (opts.port ?? 8000);
  const urlHost = hostOpt.includes(':') ? `[${hostOpt}]` : hostOpt;

  return {
    url: `http://${urlHost}:${listenPort}`,
    host: hostOpt,
    port: listenPort,
    plugins,
    pluginServersReady,
    idle: async () => {
      while (pendingLogs.size > 0) await Promise.all([...pendingLogs]);
    },
    reload: (kongConfig) => {
      const next = loadConfig(kongConfig);
      bound = bindAll(next);
      cfg = next;
      log('notice', `configuration reloaded: ${next.routes.length} routes, ${bound.length} plugins`);
    },
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      while (pendingLogs.size > 0) await Promise.all([...pendingLogs]);
      await stopServers();
    },
  };
}
