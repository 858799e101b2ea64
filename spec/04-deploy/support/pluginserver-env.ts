import { posix } from 'node:path';

/**
 * Checks Kong's external plugin-server settings the way Kong reads them (docs/deployment.md "Kong settings"):
 * `pluginserver_names` (comma list, lower-cased), then for each name N, with `-` → `_`,
 * `pluginserver_<N>_socket|start_cmd|query_cmd`, given as env vars KONG_PLUGINSERVER_<N>_SOCKET etc.
 * The commands must be kong-js-pluginserver invocations (kong-pdk 0.6.0 `cli.js` flags) whose socket is
 * `<prefix>/<sock-name>`, and the query command must print JSON (`--dump-all-plugins`).
 */

export interface PluginServer {
  name: string;
  socket: string;
  executable: string;
  pluginDir: string;
  startCmd: string[];
  queryCmd: string[];
}

export interface PluginServerCheck {
  problems: string[];
  servers: PluginServer[];
}

/** kong-js-pluginserver's options (kong-pdk 0.6.0 cli.js): name → takes a value. */
const FLAGS: Record<string, { canonical: string; value: boolean }> = {
  '-p': { canonical: 'prefix', value: true },
  '--kong-prefix': { canonical: 'prefix', value: true },
  '-kong-prefix': { canonical: 'prefix', value: true },
  '-d': { canonical: 'dir', value: true },
  '--plugins-directory': { canonical: 'dir', value: true },
  '-plugins-directory': { canonical: 'dir', value: true },
  '--sock-name': { canonical: 'sock', value: true },
  '-v': { canonical: 'verbose', value: false },
  '--verbose': { canonical: 'verbose', value: false },
  '--dump-plugin-info': { canonical: 'dump-one', value: true },
  '-dump-plugin-info': { canonical: 'dump-one', value: true },
  '--dump-all-plugins': { canonical: 'dump-all', value: false },
  '-dump-all-plugins': { canonical: 'dump-all', value: false },
};

/** Kong's default prefix (kong.conf.default), also the docker image's KONG_PREFIX. */
export const DEFAULT_KONG_PREFIX = '/usr/local/kong';

/** Where kong/Dockerfile installs deploy/docker/plugin-server-ready.mjs, the Kong container's readiness probe. */
export const READINESS_PROBE = '/usr/local/lib/kinference/plugin-server-ready.mjs';

/** Splits a command line like /bin/sh would for our simple commands (whitespace, '…' and "…"). */
export function splitCommand(cmd: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  for (const m of cmd.matchAll(re)) out.push(m[1] ?? m[2] ?? m[3] ?? '');
  return out;
}

interface ParsedCmd {
  executable: string;
  opts: Map<string, string | true>;
  problems: string[];
}

function parseCmd(tokens: string[], where: string): ParsedCmd {
  const problems: string[] = [];
  const [executable = '', ...rest] = tokens;
  const opts = new Map<string, string | true>();
  for (let i = 0; i < rest.length; i++) {
    const tok = rest[i]!;
    const flag = FLAGS[tok];
    if (!flag) {
      problems.push(`${where}: unknown kong-js-pluginserver argument ${tok}`);
      continue;
    }
    if (flag.value) {
      const v = rest[i + 1];
      if (v === undefined || v.startsWith('-')) problems.push(`${where}: ${tok} needs a value`);
      else opts.set(flag.canonical, v);
      i++;
    } else opts.set(flag.canonical, true);
  }
  return { executable, opts, problems };
}

function stripSlash(p: string): string {
  return p.length > 1 ? p.replace(/\/+$/, '') : p;
}

export function checkPluginServerEnv(env: Record<string, string>): PluginServerCheck {
  const problems: string[] = [];
  const servers: PluginServer[] = [];
  const namesRaw = env.KONG_PLUGINSERVER_NAMES;
  if (!namesRaw) return { problems: ['KONG_PLUGINSERVER_NAMES is not set'], servers };
  const names = namesRaw
    .split(',')
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n.length > 0);
  const plugins = (env.KONG_PLUGINS ?? '').split(',').map((p) => p.trim());
  if (!plugins.includes('bundled'))
    problems.push('KONG_PLUGINS must keep "bundled" (Kong plugins stay available)');
  const prefix = stripSlash(env.KONG_PREFIX ?? DEFAULT_KONG_PREFIX);

  const expectedKeys = new Set<string>(['KONG_PLUGINSERVER_NAMES']);
  for (const name of names) {
    if (!plugins.includes(name)) problems.push(`KONG_PLUGINS does not list ${name}`);
    const base = `KONG_PLUGINSERVER_${name.replace(/-/g, '_').toUpperCase()}`;
    const socket = env[`${base}_SOCKET`];
    const start = env[`${base}_START_CMD`];
    const query = env[`${base}_QUERY_CMD`];
    for (const s of ['SOCKET', 'START_CMD', 'QUERY_CMD']) expectedKeys.add(`${base}_${s}`);
    if (!socket || !start || !query) {
      problems.push(
        `${base}_SOCKET, _START_CMD and _QUERY_CMD must all be set (Kong >= 3.9 requires a query command)`,
      );
      continue;
    }
    const s = parseCmd(splitCommand(start), `${base}_START_CMD`);
    const q = parseCmd(splitCommand(query), `${base}_QUERY_CMD`);
    problems.push(...s.problems, ...q.problems);
    for (const [label, c] of [
      ['START_CMD', s],
      ['QUERY_CMD', q],
    ] as const) {
      if (!posix.isAbsolute(c.executable))
        problems.push(`${base}_${label}: use an absolute path (Kong runs it with a minimal PATH)`);
      if (posix.basename(c.executable) !== 'kong-js-pluginserver')
        problems.push(`${base}_${label}: expected kong-js-pluginserver, got ${c.executable}`);
      if (c.opts.has('verbose'))
        problems.push(`${base}_${label}: -v logs every RPC including request bodies`);
      if (typeof c.opts.get('dir') !== 'string')
        problems.push(`${base}_${label}: -d <plugins directory> is required`);
    }
    if (s.executable !== q.executable)
      problems.push(`${base}: start and query commands run different executables`);
    const sp = s.opts.get('prefix');
    const sock = s.opts.get('sock');
    if (typeof sp !== 'string') problems.push(`${base}_START_CMD: -p <kong prefix> is required`);
    if (typeof sock !== 'string') problems.push(`${base}_START_CMD: --sock-name is required`);
    if (typeof sp === 'string' && typeof sock === 'string') {
      const listens = posix.join(sp, sock);
      if (listens !== socket)
        problems.push(`${base}_SOCKET is ${socket} but the server listens on ${listens}`);
      if (stripSlash(sp) !== prefix)
        problems.push(`${base}_START_CMD: -p ${sp} differs from the Kong prefix ${prefix}`);
    }
    if (s.opts.has('dump-all') || s.opts.has('dump-one'))
      problems.push(`${base}_START_CMD must not dump plugin info`);
    if (!q.opts.has('dump-all'))
      problems.push(`${base}_QUERY_CMD must use --dump-all-plugins (Kong parses JSON)`);
    if (q.opts.has('dump-one'))
      problems.push(`${base}_QUERY_CMD: --dump-plugin-info prints msgpack, not JSON`);
    if (s.opts.get('dir') !== q.opts.get('dir'))
      problems.push(`${base}: start and query commands use different plugin directories`);
    const dir = s.opts.get('dir');
    if (typeof dir === 'string')
      servers.push({
        name,
        socket,
        executable: s.executable,
        pluginDir: dir,
        startCmd: splitCommand(start),
        queryCmd: splitCommand(query),
      });
  }
  for (const k of Object.keys(env))
    if (k.startsWith('KONG_PLUGINSERVER_') && !expectedKeys.has(k))
      problems.push(`${k} does not belong to any name in KONG_PLUGINSERVER_NAMES (Kong ignores it)`);
  return { problems, servers };
}

/** The Kong Helm chart's `env:` map → the KONG_* variables it sets (key upper-cased, KONG_ prefix). */
export function kongEnvFromHelmValues(env: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) out[`KONG_${k.toUpperCase()}`] = String(v);
  return out;
}

/** nginx size ("8k", "8m", "1g", bytes) → bytes. */
export function nginxSizeBytes(size: string): number {
  const m = /^(\d+)([kKmMgG]?)$/.exec(size.trim());
  if (!m) throw new Error(`not an nginx size: ${size}`);
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g'];
  return Number(m[1]) * mult;
}
