import { isObj, obj, readText, type Obj } from './repo.js';
import { parse } from 'yaml';

/**
 * Compose-file helpers for offline checks: variable interpolation as Compose does it (`${VAR}`,
 * `${VAR:-default}`, `${VAR-default}`, `$$` for a literal `$`), and typed views of services.
 */

export function interpolate(s: string, env: Record<string, string | undefined> = {}): string {
  return s.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}/g,
    (all, name, colon, op, arg) => {
      if (all === '$$') return '$';
      const v = env[name as string];
      const unset = v === undefined || (colon === ':' && v === '');
      if (op === '-') return unset ? (arg as string) : v!;
      if (op === '?' && unset) throw new Error(`compose: ${name as string} is required: ${arg as string}`);
      return v ?? '';
    },
  );
}

function deepInterpolate(v: unknown, env: Record<string, string | undefined>): unknown {
  if (typeof v === 'string') return interpolate(v, env);
  if (Array.isArray(v)) return v.map((x) => deepInterpolate(x, env));
  if (isObj(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deepInterpolate(x, env)]));
  return v;
}

/** docker-compose.yml with anchors merged and variables at their defaults (an empty environment). */
export function loadCompose(rel = 'docker-compose.yml', env: Record<string, string | undefined> = {}): Obj {
  return obj(deepInterpolate(parse(readText(rel), { merge: true }), env), rel);
}

export function services(compose: Obj): Record<string, Obj> {
  const s = obj(compose.services, 'services');
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, obj(v, `services.${k}`)]));
}

export function profiles(svc: Obj): string[] {
  return Array.isArray(svc.profiles) ? (svc.profiles as string[]) : [];
}

/** `environment` as a map, from either the map or the `KEY=value` list form. */
export function environment(svc: Obj): Record<string, string> {
  const e = svc.environment;
  if (e === undefined) return {};
  if (Array.isArray(e))
    return Object.fromEntries(
      (e as string[]).map((kv) => {
        const i = kv.indexOf('=');
        return i < 0 ? [kv, ''] : [kv.slice(0, i), kv.slice(i + 1)];
      }),
    );
  return Object.fromEntries(Object.entries(obj(e, 'environment')).map(([k, v]) => [k, String(v ?? '')]));
}

export interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
  /** A host path (bind mount) rather than a named volume. */
  bind: boolean;
}

export function mounts(svc: Obj): Mount[] {
  const v = svc.volumes;
  if (!Array.isArray(v)) return [];
  return v.map((m) => {
    if (typeof m === 'string') {
      const [source = '', target = '', mode = ''] = m.split(':');
      return { source, target, readOnly: mode.split(',').includes('ro'), bind: /^[./~]/.test(source) };
    }
    const o = obj(m, 'volume');
    return {
      source: String(o.source ?? ''),
      target: String(o.target ?? ''),
      readOnly: o.read_only === true,
      bind: o.type === 'bind',
    };
  });
}

/** The command as a list (Compose also accepts a string, split like a shell would). */
export function command(svc: Obj, key: 'command' | 'entrypoint' = 'command'): string[] {
  const c = svc[key];
  if (c === undefined) return [];
  if (typeof c === 'string') return c.split(/\s+/).filter((x) => x.length > 0);
  return (c as unknown[]).map(String);
}

/** Value following `--flag` (or from `--flag=value`) in an argument list. */
export function flagValue(args: string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === flag) return args[i + 1];
    if (a.startsWith(`${flag}=`)) return a.slice(flag.length + 1);
  }
  return undefined;
}

/** Names under which other containers reach a service: its name plus network aliases. */
export function hostNames(name: string, svc: Obj): string[] {
  const names = [name];
  if (isObj(svc.networks))
    for (const n of Object.values(svc.networks))
      if (isObj(n) && Array.isArray(n.aliases)) names.push(...(n.aliases as string[]));
  return names;
}

export function dependsOn(svc: Obj): Record<string, string> {
  const d = svc.depends_on;
  if (d === undefined) return {};
  if (Array.isArray(d)) return Object.fromEntries((d as string[]).map((n) => [n, 'service_started']));
  return Object.fromEntries(
    Object.entries(obj(d, 'depends_on')).map(([k, v]) => [
      k,
      String(obj(v, `depends_on.${k}`).condition ?? 'service_started'),
    ]),
  );
}
