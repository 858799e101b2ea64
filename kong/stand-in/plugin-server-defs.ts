// Where the stand-in's plugin servers come from: Kong's env keys, else the bundled kinference plugin.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PluginServerDef } from './plugin-server.js';

/** Where plugin servers come from: Kong's own env keys when set, else the bundled kinference plugin. */

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The repo (package) root, found from this module whether it runs from source (tsx) or from dist/. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'kinference') return dir;
      } catch {
        // not ours; keep walking up
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the kinference package root');
    dir = up;
  }
}

export function kongJsPluginServerBin(): string {
  return createRequire(import.meta.url).resolve('kong-pdk/bin/kong-js-pluginserver');
}

export interface JsPluginServerOptions {
  /** Node flags for the server (e.g. --expose-gc for a memory measurement). */
  nodeArgs?: string[];
  /** Variables the started server gets (Kong passes only those nginx_main_env declares). */
  env?: Record<string, string>;
}

/** Kong's start/query commands for one JS plugin directory (kong.md §4.1), run with this Node. */
export function jsPluginServerDef(
  name: string,
  pluginsDir: string,
  prefix: string,
  opts: JsPluginServerOptions = {},
): PluginServerDef {
  const sockName = `${name}.sock`;
  const base = `${shellQuote(process.execPath)} ${shellQuote(kongJsPluginServerBin())} -d ${shellQuote(resolve(pluginsDir))}`;
  const env = Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${shellQuote(v)}`);
  const node = [shellQuote(process.execPath), ...(opts.nodeArgs ?? []).map(shellQuote)].join(' ');
  const start = `${node} ${shellQuote(kongJsPluginServerBin())} -d ${shellQuote(resolve(pluginsDir))}`;
  return {
    name,
    socket: join(prefix, sockName),
    startCmd: `${env.length > 0 ? `env ${env.join(' ')} ` : ''}${start} -p ${shellQuote(prefix)} --sock-name ${shellQuote(sockName)}`,
    queryCmd: `${base} --dump-all-plugins`,
  };
}

export function defaultPluginsDir(): string {
  return join(packageRoot(), 'dist', 'plugins', 'kinference');
}

/**
 * KONG_PLUGINSERVER_NAMES + KONG_PLUGINSERVER_<NAME>_{SOCKET,START_CMD,QUERY_CMD}, name upper-cased with
 * `-` → `_` (conf_loader). Socket defaults to <KONG_PREFIX>/<name>.socket as in Kong. Null when unset.
 */
export function pluginServersFromEnv(env: NodeJS.ProcessEnv = process.env): PluginServerDef[] | null {
  const names = env.KONG_PLUGINSERVER_NAMES;
  if (!names) return null;
  const prefix = env.KONG_PREFIX ?? '/usr/local/kong';
  return names
    .split(',')
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n.length > 0)
    .map((name) => {
      const key = `KONG_PLUGINSERVER_${name.toUpperCase().replace(/-/g, '_')}`;
      const queryCmd = env[`${key}_QUERY_CMD`];
      if (!queryCmd) throw new Error(`${key}_QUERY_CMD is required (Kong ≥ 3.9 needs a query command)`);
      return {
        name,
        socket: env[`${key}_SOCKET`] ?? join(prefix, `${name}.socket`),
        startCmd: env[`${key}_START_CMD`] ?? null,
        queryCmd,
      };
    });
}
