// Kong's key-auth plugin (priority 1250, access) as Kong 3.9 runs it, on the stand-in's consumers.
import { KinferenceError } from '../../src/core/errors.js';
import { AuthenticateError, authenticate, loadConsumer } from './authenticate.js';
import type { BundledPlugin } from './bundled-plugins.js';
import type { ConsumerEntity, KeyAuthCredential } from './declarative.js';
import { kongError } from './error-response.js';
import { headersAsLua, type RequestContext } from './request-context.js';
import { getUriArgs } from './uri-args.js';

/**
 * key-auth (kong/plugins/key-auth/handler.lua, schema.lua at 3.9.3): the key is looked for under each of
 * `key_names` in the headers (case-insensitive, `_` = `-`), then the query, then (key_in_body) a JSON or
 * form body. A repeated key is "Duplicate API key found", none or an empty one "No API key found in
 * request", an unknown one "Unauthorized", each a 401 with `WWW-Authenticate: Key` (or `Key realm="…"`).
 * With `anonymous` a failure authenticates that consumer instead (logical OR). On success it authenticates
 * the consumer and credential and sets X-Consumer-ID, X-Consumer-Custom-ID, X-Consumer-Username,
 * X-Credential-Identifier upstream (clearing those it has no value for) and clears X-Anonymous-Consumer; an
 * anonymous pass sets X-Anonymous-Consumer: true. X-Consumer-Groups is the acl plugin's header (ACL groups),
 * not key-auth's: key-auth does not send it.
 */

const FIELDS: Record<string, (v: unknown) => string | null> = {
  key_names: (v) =>
    Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string' && /^[A-Za-z0-9_-]+$/.test(x))
      ? null
      : 'expected an array of header names ([a-z], [A-Z], [0-9], _ and -)',
  hide_credentials: (v) => (typeof v === 'boolean' ? null : 'expected a boolean'),
  anonymous: (v) => (typeof v === 'string' ? null : 'expected a string'),
  key_in_header: (v) => (typeof v === 'boolean' ? null : 'expected a boolean'),
  key_in_query: (v) => (typeof v === 'boolean' ? null : 'expected a boolean'),
  key_in_body: (v) => (typeof v === 'boolean' ? null : 'expected a boolean'),
  run_on_preflight: (v) => (typeof v === 'boolean' ? null : 'expected a boolean'),
  realm: (v) => (typeof v === 'string' ? null : 'expected a string'),
};
const DEFAULTS = {
  key_names: ['apikey'],
  hide_credentials: false,
  key_in_header: true,
  key_in_query: true,
  key_in_body: false,
  run_on_preflight: true,
};

/** Kong's schema check: unknown fields, types, then the defaults of absent fields. */
export function checkConfig(
  name: string,
  id: string,
  c: Record<string, unknown>,
  fields: Record<string, (v: unknown) => string | null>,
  defaults: Record<string, unknown>,
): Record<string, unknown> {
  const errors: string[] = [];
  for (const [k, v] of Object.entries(c)) {
    const check = fields[k];
    if (!check) errors.push(`config.${k}: unknown field`);
    else if (v !== null && v !== undefined) {
      const e = check(v);
      if (e) errors.push(`config.${k}: ${e}`);
    }
  }
  if (errors.length > 0)
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `schema violation for plugin ${name} (${id}):\n${errors.map((e) => `  ${e}`).join('\n')}`,
    );
  const out: Record<string, unknown> = { ...defaults };
  for (const [k, v] of Object.entries(c)) if (v !== null && v !== undefined) out[k] = v;
  return out;
}

/** The body's fields for key_in_body: JSON or form-urlencoded (multipart is not read by the stand-in). */
function bodyFields(ctx: RequestContext): Record<string, unknown> {
  const type = ctx.headers.get('content-type')?.[0]?.toLowerCase() ?? '';
  try {
    if (type.includes('application/json')) {
      const v: unknown = JSON.parse(ctx.body.toString('utf8'));
      return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
    }
    if (type.includes('application/x-www-form-urlencoded')) return getUriArgs(ctx.body.toString('latin1'));
  } catch {
    // "Cannot process request body": Kong logs it at info and looks no further.
  }
  return {};
}

/** ngx.req.set_uri_args without `name`: the other pairs kept as sent. */
function withoutQueryArg(raw: string, name: string): string {
  return raw
    .split('&')
    .filter((pair) => {
      const key = pair.split('=')[0]!;
      let decoded = key;
      try {
        decoded = decodeURIComponent(key.replace(/\+/g, ' '));
      } catch {
        // a malformed escape stays as sent
      }
      return decoded !== name;
    })
    .join('&');
}

export function keyAuth(): BundledPlugin {
  return {
    name: 'key-auth',
    priority: 1250,
    phases: new Set(['access']),
    noConsumer: true,
    configure(entity) {
      return checkConfig('key-auth', entity.id, entity.config, FIELDS, DEFAULTS);
    },
    access(conf, ctx, kong) {
      if (!conf.run_on_preflight && ctx.method === 'OPTIONS') return;
      const setConsumer = (consumer: ConsumerEntity | null, credential: KeyAuthCredential | null): void => {
        authenticate(ctx, kong.config, consumer, credential);
        const set = (name: string, v: string | null): void => {
          if (v === null) ctx.headers.delete(name);
          else ctx.headers.set(name, [v]);
        };
        set('x-consumer-id', consumer?.id ?? null);
        set('x-consumer-custom-id', consumer?.customId ?? null);
        set('x-consumer-username', consumer?.username ?? null);
        set('x-credential-identifier', credential?.id ?? null);
        set('x-anonymous-consumer', credential ? null : 'true');
      };
      const www = typeof conf.realm === 'string' ? `Key realm="${conf.realm}"` : 'Key';
      const fail = (message: string) => ({ status: 401, message, headers: { 'www-authenticate': [www] } });

      const doAuthentication = () => {
        const headers = headersAsLua(ctx.headers);
        const query = getUriArgs(ctx.rawQuery);
        let body: Record<string, unknown> | null = null;
        let key: string | undefined;
        for (const name of conf.key_names as string[]) {
          let v: unknown;
          if (conf.key_in_header) v = headers[name.toLowerCase().replace(/_/g, '-')];
          if (v === undefined && conf.key_in_query) v = query[name];
          if (v === undefined && conf.key_in_body) v = (body ??= bodyFields(ctx))[name];
          if (typeof v === 'string') {
            key = v;
            if (conf.hide_credentials) {
              ctx.upstreamQuery = withoutQueryArg(ctx.upstreamQuery, name);
              ctx.headers.delete(name.toLowerCase());
              if (conf.key_in_body && body !== null && name in body) {
                const rest = { ...body };
                delete rest[name];
                ctx.upstreamBody = Buffer.from(JSON.stringify(rest));
              }
            }
            break;
          }
          if (Array.isArray(v)) return fail('Duplicate API key found');
        }
        if (!key) return fail('No API key found in request');
        const credential = kong.config.keyauthCredentials.find((c) => c.key === key);
        if (!credential) return fail('Unauthorized');
        const consumer = kong.config.consumers.find((c) => c.id === credential.consumerId) ?? null;
        setConsumer(consumer, credential);
        return null;
      };

      try {
        if (typeof conf.anonymous === 'string') {
          // Logical OR: an earlier auth plugin's credential is enough; a failure falls back to anonymous.
          if (ctx.credential) return;
          if (doAuthentication() === null) return;
          setConsumer(loadConsumer(kong.config, conf.anonymous, true), null);
          return;
        }
        const err = doAuthentication();
        if (err)
          return kongError(
            err.status,
            err.message,
            ctx.id,
            ctx.headers.get('accept')?.join(','),
            err.headers,
          );
      } catch (e) {
        // authenticate(nil, nil) for an anonymous consumer that does not exist: a Lua error, Kong answers 500.
        if (e instanceof AuthenticateError) {
          kong.log('err', `[key-auth] ${e.message}`);
          return kongError(500, 'An unexpected error occurred', ctx.id, ctx.headers.get('accept')?.join(','));
        }
        throw e;
      }
      return;
    },
    close() {},
  };
}
