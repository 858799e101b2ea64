import { describe, expect, it } from 'vitest';
import { posix } from 'node:path';
import { copies, globalArgs, readDockerfile, type Instruction } from './support/dockerfile.js';
import { READINESS_PROBE, checkPluginServerEnv } from './support/pluginserver-env.js';
import { environment, loadCompose, services } from './support/compose.js';
import { exists, readText } from './support/repo.js';
import { runtimePackage } from './support/runtime-package.js';

const pkg = JSON.parse(readText('package.json')) as {
  dependencies: Record<string, string>;
  engines: { node: string };
};

function finalStage(instrs: Instruction[]): Instruction[] {
  const last = Math.max(...instrs.map((i) => i.stage));
  return instrs.filter((i) => i.stage === last);
}

function resolveFrom(instr: Instruction, args: Record<string, string>): string {
  return instr.args
    .split(/\s+/)[0]!
    .replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => args[(a ?? b) as string] ?? '');
}

function runs(instrs: Instruction[]): string {
  return instrs
    .filter((i) => i.keyword === 'RUN')
    .map((i) => i.args)
    .join('\n');
}

/** .dockerignore patterns we use: exact paths, directory names and `*.ext`. */
function ignored(path: string): boolean {
  const patterns = readText('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  return patterns.some((p) =>
    p.startsWith('*.') ? path.endsWith(p.slice(1)) : path === p || path.startsWith(`${p}/`),
  );
}

const kongEnv = environment(services(loadCompose()).kong!);
const server = checkPluginServerEnv(kongEnv).servers[0]!;

describe('kong/Dockerfile', () => {
  const instrs = readDockerfile('kong/Dockerfile');
  const last = finalStage(instrs);
  const args = globalArgs(instrs);

  it('is Kong 3.9.3 (ubuntu noble) and ends as the kong user', () => {
    expect(resolveFrom(last[0]!, args)).toBe('kong:3.9.3');
    expect(last.filter((i) => i.keyword === 'USER').at(-1)?.args).toBe('kong');
  });

  it('builds the bundle from the lockfile in a Node 20 stage', () => {
    const build = instrs.filter((i) => i.stageName === 'build');
    expect(resolveFrom(build[0]!, args)).toBe('node:20-bookworm');
    expect(runs(build)).toMatch(/npm ci\b/);
    expect(runs(build)).toMatch(/npm run build\b/);
    expect(pkg.engines.node).toBe('>=20');
  });

  it('installs kong-pdk at the version the tests run against, where the start command finds it', () => {
    expect(pkg.dependencies['kong-pdk']).toMatch(/^\d+\.\d+\.\d+$/);
    expect(runs(last)).toContain(
      `npm install -g --no-audit --no-fund kong-pdk@${pkg.dependencies['kong-pdk']}`,
    );
    // npm -g puts bins in <node prefix>/bin; node is copied to /usr/local/bin, so the prefix is /usr/local.
    const node = copies(last).find((c) => c.sources.includes('/usr/local/bin/node'));
    expect(node?.dest).toBe('/usr/local/bin/node');
    expect(server.executable).toBe('/usr/local/bin/kong-js-pluginserver');
    // `#!/usr/bin/env node` under Kong's minimal PATH needs node in /usr/bin.
    expect(runs(last)).toContain('ln -sf /usr/local/bin/node /usr/bin/node');
  });

  it('copies only the bundle into the plugin directory the start and query commands name', () => {
    const intoDir = copies(last).filter(
      (c) => posix.dirname(c.dest) === server.pluginDir || c.dest.startsWith(`${server.pluginDir}/`),
    );
    expect(intoDir).toEqual([
      expect.objectContaining({
        from: 'build',
        sources: ['/app/dist/plugins/kinference/kinference.js'],
        dest: `${server.pluginDir}/kinference.js`,
      }),
    ]);
  });

  it('installs the runtime externals in the parent of the plugin directory (Node resolves them from there)', () => {
    const parent = `${posix.dirname(server.pluginDir)}/`;
    const runtime = copies(last).find((c) => c.dest === parent);
    expect(runtime).toEqual(expect.objectContaining({ from: 'build', sources: ['/out/js-plugins/'] }));
    expect(runs(instrs.filter((i) => i.stageName === 'build'))).toContain(
      'node deploy/docker/plugin-runtime-package.mjs > /out/js-plugins/package.json',
    );
  });

  it('installs the readiness probe where compose and the Helm values run it', () => {
    expect(copies(last).find((c) => c.dest === READINESS_PROBE)).toEqual(
      expect.objectContaining({ from: 'build', sources: ['/app/deploy/docker/plugin-server-ready.mjs'] }),
    );
  });

  it('fails the image build when the query command Kong runs would not print the plugin', () => {
    expect(runs(last)).toContain(kongEnv.KONG_PLUGINSERVER_KINFERENCE_QUERY_CMD!);
  });
});

describe('deploy/docker/plugin-runtime-package.mjs', () => {
  it('pins every external of the bundle to the version installed here', () => {
    const deps = runtimePackage().dependencies;
    expect(Object.keys(deps).length).toBeGreaterThan(0);
    for (const [name, version] of Object.entries(deps)) {
      expect(pkg.dependencies[name], `${name} is a runtime dependency`).toBeDefined();
      const installed = JSON.parse(readText(`node_modules/${name}/package.json`)) as { version: string };
      expect(version, name).toBe(installed.version);
    }
    // The bundle is CommonJS and its directory's nearest package.json is this one.
    expect(runtimePackage().type).toBe('commonjs');
  });
});

describe('Dockerfile (kinference CLI image: collector, emulator)', () => {
  const instrs = readDockerfile('Dockerfile');
  const last = finalStage(instrs);
  const args = globalArgs(instrs);

  it('copies from the build context only files that exist and are not ignored', () => {
    for (const c of copies(instrs).filter((x) => x.from === null))
      for (const s of c.sources) {
        if (s === '.') continue;
        expect(exists(s), s).toBe(true);
        expect(ignored(s), `${s} is in .dockerignore`).toBe(false);
      }
  });

  it('installs from the lockfile, not from a node_modules or dist in the context', () => {
    expect(ignored('node_modules')).toBe(true);
    expect(ignored('dist')).toBe(true);
    expect(runs(instrs)).toMatch(/npm ci\b/);
    expect(runs(instrs)).toMatch(/npm run build\b/);
  });

  it('runs bin/kinference.js from /app as the non-root node user', () => {
    expect(resolveFrom(last[0]!, args)).toBe('node:20-bookworm-slim');
    expect(last.find((i) => i.keyword === 'WORKDIR')?.args).toBe('/app');
    expect(last.find((i) => i.keyword === 'ENTRYPOINT')?.args).toBe('["node", "/app/bin/kinference.js"]');
    expect(exists('bin/kinference.js')).toBe(true);
    expect(last.filter((i) => i.keyword === 'USER').at(-1)?.args).toBe('node');
  });
});
