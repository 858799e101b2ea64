import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { posix } from 'node:path';
import {
  READINESS_PROBE,
  checkPluginServerEnv,
  kongEnvFromHelmValues,
  nginxSizeBytes,
  splitCommand,
} from './support/pluginserver-env.js';
import { environment, loadCompose, services } from './support/compose.js';
import { obj, readYaml } from './support/repo.js';
import { run } from './support/tools.js';

// The research notes' working example (kong.md §4.1), with our plugin's name.
const GOOD: Record<string, string> = {
  KONG_PLUGINS: 'bundled,kinference',
  KONG_PLUGINSERVER_NAMES: 'kinference',
  KONG_PLUGINSERVER_KINFERENCE_SOCKET: '/usr/local/kong/kinference.sock',
  KONG_PLUGINSERVER_KINFERENCE_START_CMD:
    '/usr/local/bin/kong-js-pluginserver -d /usr/local/kong/js-plugins/kinference -p /usr/local/kong --sock-name kinference.sock',
  KONG_PLUGINSERVER_KINFERENCE_QUERY_CMD:
    '/usr/local/bin/kong-js-pluginserver -d /usr/local/kong/js-plugins/kinference --dump-all-plugins',
};

describe('plugin-server settings check', () => {
  it('accepts the documented settings and reports the server', () => {
    const r = checkPluginServerEnv(GOOD);
    expect(r.problems).toEqual([]);
    expect(r.servers).toEqual([
      expect.objectContaining({
        name: 'kinference',
        socket: '/usr/local/kong/kinference.sock',
        pluginDir: '/usr/local/kong/js-plugins/kinference',
        executable: '/usr/local/bin/kong-js-pluginserver',
      }),
    ]);
  });

  it.each([
    [
      'socket not where the server listens',
      { KONG_PLUGINSERVER_KINFERENCE_SOCKET: '/usr/local/kong/js_pluginserver.sock' },
      /listens on/,
    ],
    [
      'msgpack query command',
      {
        KONG_PLUGINSERVER_KINFERENCE_QUERY_CMD:
          '/usr/local/bin/kong-js-pluginserver -d /x --dump-plugin-info kinference',
      },
      /msgpack/,
    ],
    [
      'relative executable',
      {
        KONG_PLUGINSERVER_KINFERENCE_START_CMD:
          'kong-js-pluginserver -d /usr/local/kong/js-plugins/kinference -p /usr/local/kong --sock-name kinference.sock',
      },
      /absolute path/,
    ],
    [
      'unknown flag',
      { KONG_PLUGINSERVER_KINFERENCE_START_CMD: `${GOOD.KONG_PLUGINSERVER_KINFERENCE_START_CMD} --socket x` },
      /unknown kong-js-pluginserver argument --socket/,
    ],
    [
      'verbose server',
      { KONG_PLUGINSERVER_KINFERENCE_START_CMD: `${GOOD.KONG_PLUGINSERVER_KINFERENCE_START_CMD} -v` },
      /request bodies/,
    ],
    ['plugin not enabled', { KONG_PLUGINS: 'bundled' }, /KONG_PLUGINS does not list kinference/],
    ['bundled plugins dropped', { KONG_PLUGINS: 'kinference' }, /bundled/],
    ['misspelt env name', { KONG_PLUGINSERVER_KINFERENCE_QUERY_COMMAND: 'x' }, /does not belong/],
    ['prefix elsewhere', { KONG_PREFIX: '/kong_prefix/' }, /differs from the Kong prefix/],
    [
      'directories differ',
      {
        KONG_PLUGINSERVER_KINFERENCE_QUERY_CMD:
          '/usr/local/bin/kong-js-pluginserver -d /other --dump-all-plugins',
      },
      /different plugin directories/,
    ],
  ])('rejects %s', (_what, patch, message) => {
    const r = checkPluginServerEnv({ ...GOOD, ...patch });
    expect(r.problems.join('\n')).toMatch(message);
  });

  it('rejects a missing query command (required since Kong 3.9)', () => {
    const { KONG_PLUGINSERVER_KINFERENCE_QUERY_CMD: _drop, ...rest } = GOOD;
    expect(checkPluginServerEnv(rest).problems.join('\n')).toMatch(/QUERY_CMD must all be set/);
  });

  it('maps names with dashes to env names with underscores', () => {
    const env = {
      KONG_PLUGINS: 'bundled,llm-router',
      KONG_PLUGINSERVER_NAMES: 'llm-router',
      KONG_PLUGINSERVER_LLM_ROUTER_SOCKET: '/usr/local/kong/r.sock',
      KONG_PLUGINSERVER_LLM_ROUTER_START_CMD:
        '/usr/local/bin/kong-js-pluginserver -d /p/r -p /usr/local/kong --sock-name r.sock',
      KONG_PLUGINSERVER_LLM_ROUTER_QUERY_CMD:
        '/usr/local/bin/kong-js-pluginserver -d /p/r --dump-all-plugins',
    };
    expect(checkPluginServerEnv(env).problems).toEqual([]);
  });

  it('property: the socket check holds exactly when SOCKET = prefix + sock-name', () => {
    const seg = fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/);
    fc.assert(
      fc.property(fc.array(seg, { minLength: 1, maxLength: 3 }), seg, seg, (dirs, sock, other) => {
        const prefix = `/${dirs.join('/')}`;
        const env = {
          ...GOOD,
          KONG_PREFIX: prefix,
          KONG_PLUGINSERVER_KINFERENCE_START_CMD: `/usr/local/bin/kong-js-pluginserver -d /plug -p ${prefix} --sock-name ${sock}.sock`,
          KONG_PLUGINSERVER_KINFERENCE_QUERY_CMD:
            '/usr/local/bin/kong-js-pluginserver -d /plug --dump-all-plugins',
        };
        const right = checkPluginServerEnv({
          ...env,
          KONG_PLUGINSERVER_KINFERENCE_SOCKET: posix.join(prefix, `${sock}.sock`),
        });
        expect(right.problems).toEqual([]);
        const wrongSocket = posix.join(prefix, `${other}.socket`);
        const wrong = checkPluginServerEnv({ ...env, KONG_PLUGINSERVER_KINFERENCE_SOCKET: wrongSocket });
        expect(wrong.problems.some((p) => p.includes('listens on'))).toBe(true);
      }),
    );
  });

  it('reads nginx sizes and shell-like commands', () => {
    expect(nginxSizeBytes('8k')).toBe(8192);
    expect(nginxSizeBytes('8m')).toBe(8 * 1024 * 1024);
    expect(nginxSizeBytes('1024')).toBe(1024);
    expect(() => nginxSizeBytes('8 MB')).toThrow();
    expect(splitCommand(`a -d '/x y' "z"`)).toEqual(['a', '-d', '/x y', 'z']);
  });
});

describe('plugin-server settings we ship', () => {
  it('docker-compose.yml: Kong service', () => {
    const kong = services(loadCompose()).kong!;
    const r = checkPluginServerEnv(environment(kong));
    expect(r.problems).toEqual([]);
    expect(r.servers.map((s) => s.name)).toEqual(['kinference']);
  });

  it('deploy/kubernetes/kong/kong-values.yaml: Helm chart env (prefix /kong_prefix/)', () => {
    const values = obj(readYaml('deploy/kubernetes/kong/kong-values.yaml'), 'values');
    const env = kongEnvFromHelmValues(obj(values.env, 'env'));
    const r = checkPluginServerEnv(env);
    expect(r.problems).toEqual([]);
    expect(env.KONG_DATABASE).toBe('off');
    expect(r.servers[0]!.socket.startsWith('/kong_prefix/')).toBe(true);
    // Ready once the plugin server listens on that socket and Kong's own status says ready (the chart's
    // status listener, 8100).
    const probe = obj(obj(values.readinessProbe, 'readinessProbe').exec, 'exec');
    expect(probe.command).toEqual([
      'node',
      READINESS_PROBE,
      r.servers[0]!.socket,
      'http://127.0.0.1:8100/status/ready',
    ]);
  });

  it('uses only options the installed kong-js-pluginserver lists in --help', () => {
    const help = run(process.execPath, ['node_modules/kong-pdk/bin/kong-js-pluginserver', '--help']);
    expect(help.status, help.stderr).toBe(0);
    const options = new Set([...help.stdout.matchAll(/(?<=^|[\s,])(--?[a-z][a-z-]*)/gm)].map((m) => m[1]!));
    expect(options).toContain('--dump-all-plugins');
    const server = checkPluginServerEnv(environment(services(loadCompose()).kong!)).servers[0]!;
    for (const cmd of [server.startCmd, server.queryCmd])
      for (const tok of cmd.slice(1).filter((t) => t.startsWith('-'))) expect(options, tok).toContain(tok);
  });

  it('Helm values and compose run the same server from the same plugin directory', () => {
    const compose = checkPluginServerEnv(environment(services(loadCompose()).kong!)).servers[0]!;
    const values = obj(readYaml('deploy/kubernetes/kong/kong-values.yaml'), 'values');
    const helm = checkPluginServerEnv(kongEnvFromHelmValues(obj(values.env, 'env'))).servers[0]!;
    expect(helm.executable).toBe(compose.executable);
    expect(helm.pluginDir).toBe(compose.pluginDir);
    expect(helm.queryCmd).toEqual(compose.queryCmd);
  });
});
