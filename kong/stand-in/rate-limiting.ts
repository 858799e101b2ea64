// Kong's rate-limiting plugin (request counts, priority 910) with its local and redis policies, as in 3.9.
import { Redis } from 'ioredis';
import { KinferenceError } from '../../src/core/errors.js';
import type { BundledPlugin } from './bundled-plugins.js';
import { kongError } from './error-response.js';
import { checkConfig } from './key-auth.js';
import { headerFirst, type RequestContext } from './request-context.js';
import { normalizePath } from './uri-args.js';

/**
 * rate-limiting (kong/plugins/rate-limiting/handler.lua, schema.lua, policies/init.lua at 3.9.3): fixed
 * windows aligned to the UTC second, minute, hour, day, month and year, counted per identifier (limit_by:
 * consumer → consumer or credential id, credential, ip, service, header, path; the client IP when none).
 * Every configured window is read; any at its limit stops the request with error_code (429) and
 * error_message. Headers: X-RateLimit-Limit-<Period>/-Remaining-<Period> per window and RateLimit-Limit,
 * -Remaining, -Reset for the window with the fewest left (the longer one on a tie), Retry-After on a stop.
 * `local` counts in this gateway's memory and increments after the access phase (Kong's timer_at(0));
 * `redis` counts in Redis, shared by every gateway: realtime (sync_rate -1, the default) increments as it
 * reads with Kong's own script, so a refused request is counted too, as in Kong. Counter keys are Kong's:
 * `ratelimit:<route_id>:<service_id>:<identifier>:<window start ms>:<period>`, the ids those of the plugin's
 * own scope (the empty UUID when unscoped). Redis errors: fault_tolerant (default) logs and lets the request
 * through without headers; otherwise the request gets a 500. sync_rate > 0 (batched Redis sync) is refused.
 */

const PERIODS = ['second', 'minute', 'hour', 'day', 'month', 'year'] as const;
type Period = (typeof PERIODS)[number];
const EXPIRATION: Record<Period, number> = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86400,
  month: 2592000,
  year: 31536000,
};
const EMPTY_UUID = '00000000-0000-0000-0000-000000000000';
const CAP: Record<Period, string> = {
  second: 'Second',
  minute: 'Minute',
  hour: 'Hour',
  day: 'Day',
  month: 'Month',
  year: 'Year',
};

/** policies/init.lua's realtime usage script: INCR, EXPIRE on the first hit, answer the count before. */
const USAGE_SCRIPT = `
        local cache_key, expiration = KEYS[1], ARGV[1]
        local result_incr = redis.call("incr", cache_key)
        if result_incr == 1 then
          redis.call("expire", cache_key, expiration)
        end

        return result_incr - 1
      `;

/** kong/tools/timestamp.lua get_timestamps: the start (ms) of each UTC window holding `nowMs`. */
export function windowStarts(nowMs: number): Record<Period, number> {
  const d = new Date(Math.floor(nowMs / 1000) * 1000);
  const y = d.getUTCFullYear();
  const mo = d.getUTCMonth();
  const day = d.getUTCDate();
  const h = d.getUTCHours();
  const mi = d.getUTCMinutes();
  return {
    second: d.getTime(),
    minute: Date.UTC(y, mo, day, h, mi),
    hour: Date.UTC(y, mo, day, h),
    day: Date.UTC(y, mo, day),
    month: Date.UTC(y, mo, 1),
    year: Date.UTC(y, 0, 1),
  };
}

const num = (v: unknown): string | null =>
  typeof v === 'number' && v > 0 ? null : 'value must be greater than 0';
const str = (v: unknown): string | null => (typeof v === 'string' ? null : 'expected a string');
const boolean = (v: unknown): string | null => (typeof v === 'boolean' ? null : 'expected a boolean');
const oneOf =
  (...xs: string[]) =>
  (v: unknown): string | null =>
    typeof v === 'string' && xs.includes(v) ? null : `expected one of: ${xs.join(', ')}`;

const REDIS_FIELDS = [
  'host',
  'port',
  'timeout',
  'username',
  'password',
  'database',
  'ssl',
  'ssl_verify',
  'server_name',
];
const SHORTHANDS: Record<string, string> = Object.fromEntries(REDIS_FIELDS.map((f) => [`redis_${f}`, f]));
const FIELDS: Record<string, (v: unknown) => string | null> = {
  ...Object.fromEntries(PERIODS.map((p) => [p, num])),
  limit_by: oneOf('consumer', 'credential', 'ip', 'service', 'header', 'path'),
  header_name: (v) => (typeof v === 'string' && /^[A-Za-z0-9_-]+$/.test(v) ? null : 'bad header name'),
  path: (v) => (typeof v === 'string' && v.startsWith('/') ? null : 'should start with: /'),
  // DB-less Kong offers local and redis only (`cluster` needs a database).
  policy: oneOf('local', 'redis'),
  fault_tolerant: boolean,
  redis: (v) => (typeof v === 'object' && v !== null && !Array.isArray(v) ? null : 'expected a record'),
  hide_client_headers: boolean,
  error_code: num,
  error_message: str,
  sync_rate: (v) => (typeof v === 'number' ? null : 'expected a number'),
  ...Object.fromEntries(Object.keys(SHORTHANDS).map((k) => [k, () => null])),
};
const DEFAULTS = {
  limit_by: 'consumer',
  policy: 'local',
  fault_tolerant: true,
  hide_client_headers: false,
  error_code: 429,
  error_message: 'API rate limit exceeded',
  sync_rate: -1,
};

interface RedisConf {
  host: string | null;
  port: number;
  timeout: number;
  username: string | null;
  password: string | null;
  database: number;
  ssl: boolean;
  ssl_verify: boolean;
  server_name: string | null;
}

function configure(id: string, raw: Record<string, unknown>): Record<string, unknown> {
  const fail = (msg: string): never => {
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `schema violation for plugin rate-limiting (${id}):\n  ${msg}`,
    );
  };
  const c = checkConfig('rate-limiting', id, raw, FIELDS, DEFAULTS);
  // Deprecated redis_* shorthands (removal in 4.0) land in config.redis.
  const redisIn: Record<string, unknown> = { ...((c.redis as Record<string, unknown> | undefined) ?? {}) };
  for (const [short, field] of Object.entries(SHORTHANDS))
    if (c[short] !== undefined) {
      redisIn[field] = c[short];
      delete c[short];
    }
  for (const k of Object.keys(redisIn))
    if (!REDIS_FIELDS.includes(k)) fail(`config.redis.${k}: unknown field`);
  const redis: RedisConf = {
    host: (redisIn.host as string | undefined) ?? null,
    port: (redisIn.port as number | undefined) ?? 6379,
    timeout: (redisIn.timeout as number | undefined) ?? 2000,
    username: (redisIn.username as string | undefined) ?? null,
    password: (redisIn.password as string | undefined) ?? null,
    database: (redisIn.database as number | undefined) ?? 0,
    ssl: (redisIn.ssl as boolean | undefined) ?? false,
    ssl_verify: (redisIn.ssl_verify as boolean | undefined) ?? false,
    server_name: (redisIn.server_name as string | undefined) ?? null,
  };
  if (redis.host !== null && typeof redis.host !== 'string') fail('config.redis.host: expected a string');
  if (!Number.isInteger(redis.port) || redis.port < 0 || redis.port > 65535)
    fail('config.redis.port: value should be between 0 and 65535');
  if (!Number.isInteger(redis.timeout) || redis.timeout < 0 || redis.timeout > 2147483646)
    fail('config.redis.timeout: value should be between 0 and 2147483646');
  if (!Number.isInteger(redis.database)) fail('config.redis.database: expected an integer');
  c.redis = redis;
  if (!PERIODS.some((p) => typeof c[p] === 'number'))
    fail(`at least one of these fields must be non-empty: ${PERIODS.map((p) => `'config.${p}'`).join(', ')}`);
  // validate_periods_order: no longer window may allow fewer requests than a shorter one.
  PERIODS.forEach((lower, i) => {
    const v1 = c[lower];
    if (typeof v1 !== 'number') return;
    for (const upper of PERIODS.slice(i + 1)) {
      const v2 = c[upper];
      if (typeof v2 === 'number' && v2 < v1)
        fail(
          `The limit for ${upper}(${v2.toFixed(1)}) cannot be lower than the limit for ${lower}(${v1.toFixed(1)})`,
        );
    }
  });
  if (c.policy !== 'redis' && c.sync_rate !== -1) fail('sync_rate can only be used with the redis policy');
  if (c.policy === 'redis' && c.sync_rate !== -1)
    fail('config.sync_rate: the stand-in counts in Redis in real time only (sync_rate -1)');
  if (c.policy === 'redis' && redis.host === null) fail('config.redis.host: required field missing');
  if (c.limit_by === 'header' && typeof c.header_name !== 'string')
    fail('config.header_name: required field missing');
  if (c.limit_by === 'path' && typeof c.path !== 'string') fail('config.path: required field missing');
  return c;
}

function identifierOf(conf: Record<string, unknown>, ctx: RequestContext): string {
  let id: string | undefined;
  switch (conf.limit_by) {
    case 'service':
      id = ctx.service.id;
      break;
    case 'consumer':
      id = (ctx.consumer ?? ctx.credential)?.id;
      break;
    case 'credential':
      id = ctx.credential?.id;
      break;
    case 'header':
      id = headerFirst(ctx.headers, conf.header_name as string);
      break;
    case 'path': {
      const p = normalizePath(ctx.rawPath ?? ctx.path);
      if (p === conf.path) id = p;
      break;
    }
  }
  // kong.client.get_forwarded_ip(): the stand-in trusts no proxy, so the peer's address.
  return id ?? ctx.clientIp;
}

export function rateLimiting(): BundledPlugin {
  /** The `local` policy's shm (kong_rate_limiting_counters): key → count and expiry (ms). */
  const shm = new Map<string, { n: number; expires: number }>();
  const clients = new Map<string, Redis>();
  let lastSweep = 0;

  const redisFor = (r: RedisConf): Redis => {
    const key = `${r.host}:${r.port};${r.database};${r.username ?? ''};${r.password ?? ''};${r.ssl}`;
    let c = clients.get(key);
    if (!c) {
      c = new Redis({
        host: r.host!,
        port: r.port,
        db: r.database,
        ...(r.username ? { username: r.username } : {}),
        ...(r.password ? { password: r.password } : {}),
        ...(r.ssl ? { tls: { rejectUnauthorized: r.ssl_verify, servername: r.server_name ?? r.host! } } : {}),
        connectTimeout: r.timeout || 2000,
        commandTimeout: r.timeout || 2000,
        maxRetriesPerRequest: 0,
        retryStrategy: (n) => Math.min(n * 100, 1000),
      });
      c.on('error', () => undefined); // each failed command is reported by the access handler
      clients.set(key, c);
    }
    return c;
  };

  const usageLocal = (key: string, now: number): number => {
    const e = shm.get(key);
    return e && e.expires > now ? e.n : 0;
  };
  const incrementLocal = (keys: [string, Period][], now: number): void => {
    for (const [key, period] of keys) {
      const e = shm.get(key);
      if (e && e.expires > now) e.n += 1;
      else shm.set(key, { n: 1, expires: now + EXPIRATION[period] * 1000 });
    }
    if (now - lastSweep > 10_000) {
      lastSweep = now;
      for (const [k, e] of shm) if (e.expires <= now) shm.delete(k);
    }
  };

  return {
    name: 'rate-limiting',
    priority: 910,
    phases: new Set(['access']),
    configure(entity) {
      return configure(entity.id, entity.config);
    },
    async access(conf, ctx, kong) {
      const now = Date.now();
      const currentTs = Math.floor(now / 1000) * 1000; // ngx.time() * 1000
      const identifier = identifierOf(conf, ctx);
      const starts = windowStarts(currentTs);
      const limits = PERIODS.filter((p) => typeof conf[p] === 'number');
      const routeId = conf.route_id ?? EMPTY_UUID;
      const serviceId = conf.service_id ?? EMPTY_UUID;
      const keyOf = (p: Period): string =>
        `ratelimit:${String(routeId)}:${String(serviceId)}:${identifier}:${starts[p]}:${p}`;

      let usage: Map<Period, { limit: number; remaining: number }> | null = new Map();
      let stop: Period | null = null;
      try {
        for (const p of limits) {
          let used: number;
          if (conf.policy === 'redis') {
            const r = redisFor(conf.redis as RedisConf);
            used = Number(await r.eval(USAGE_SCRIPT, 1, keyOf(p), EXPIRATION[p]));
          } else used = usageLocal(keyOf(p), now);
          const limit = conf[p] as number;
          const remaining = limit - used;
          usage.set(p, { limit, remaining });
          if (remaining <= 0) stop = p;
        }
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        if (!conf.fault_tolerant) {
          kong.log('err', `[rate-limiting] ${msg}`);
          return kongError(500, 'An unexpected error occurred', ctx.id, ctx.headers.get('accept')?.join(','));
        }
        kong.log('err', `[rate-limiting] failed to get usage: ${msg}`);
        usage = null;
        stop = null;
      }

      if (usage) {
        const headers = (ctx.responseHeaders ??= new Map());
        const store = (name: string, v: number): void => {
          headers.set(name.toLowerCase(), { name, values: [String(v)] });
        };
        let reset = 0;
        if (!conf.hide_client_headers) {
          let limit: number | undefined;
          let window = 0;
          let remaining = 0;
          for (const [p, u] of usage) {
            let left = u.remaining;
            if (stop === null || stop === p) left -= 1;
            left = Math.max(0, left);
            const w = EXPIRATION[p];
            if (limit === undefined || left < remaining || (left === remaining && w > window)) {
              limit = u.limit;
              window = w;
              remaining = left;
              reset = Math.max(1, window - Math.floor((currentTs - starts[p]) / 1000));
            }
            store(`X-RateLimit-Limit-${CAP[p]}`, u.limit);
            store(`X-RateLimit-Remaining-${CAP[p]}`, left);
          }
          store('RateLimit-Limit', limit!);
          store('RateLimit-Remaining', remaining);
          store('RateLimit-Reset', reset);
        }
        if (stop !== null) {
          if (!conf.hide_client_headers) store('Retry-After', reset);
          return kongError(
            conf.error_code as number,
            conf.error_message as string,
            ctx.id,
            ctx.headers.get('accept')?.join(','),
          );
        }
      }
      // Realtime redis counted while reading; local increments in a timer after the phase (timer_at(0)).
      if (conf.policy === 'local') {
        const keys = limits.map((p): [string, Period] => [keyOf(p), p]);
        setImmediate(() => incrementLocal(keys, now));
      }
      return undefined;
    },
    close() {
      for (const c of clients.values()) c.disconnect();
      clients.clear();
      shm.clear();
    },
  };
}
