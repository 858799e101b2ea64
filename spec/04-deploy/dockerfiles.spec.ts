import { describe, expect, it } from 'vitest';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { copies, globalArgs, readDockerfile, type Instruction } from './support/dockerfile.js';
import { READINESS_PROBE, checkPluginServerEnv } from './support/pluginserver-env.js';
import { command, environment, loadCompose, services } from './support/compose.js';
import { exists, obj, readText, repoPath, ROOT } from './support/repo.js';
import { runtimePackage } from './support/runtime-package.js';
import { run } from './support/tools.js';

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

/** What the tools built on the library leave in /app: sources, and their compiled dist/ trees. */
const TOOL_PATHS = ['bench', 'emulator', 'kong', 'dist/bench', 'dist/emulator', 'dist/kong'].map(
  (p) => `/app/${p}`,
);
const within = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}/`);

/** Sources copied from the build stage that are, or contain, a tool (copying /app or /app/dist does). */
function toolCopies(instrs: Instruction[]): string[] {
  return copies(instrs)
    .filter((c) => c.from === 'build')
    .flatMap((c) => c.sources.map((s) => s.replace(/\/+$/, '')))
    .filter((s) => TOOL_PATHS.some((t) => within(s, t) || within(t, s)));
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

  it('carries no benchmark, emulator or Kong stand-in', () => {
    expect(toolCopies(last)).toEqual([]);
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

describe('Dockerfile (kinference images: runtime, the default target, and tools)', () => {
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

  it('ends with the runtime stage, the default target, and names a tools stage that carries everything', () => {
    expect(last[0]!.stageName).toBe('runtime');
    const tools = instrs.filter((i) => i.stageName === 'tools');
    expect(copies(tools).map((c) => [c.from, c.sources, c.dest])).toEqual([['build', ['/app'], '/app']]);
    expect(tools.find((i) => i.keyword === 'ENTRYPOINT')?.args).toBe('["node", "/app/bin/kinference.js"]');
  });

  it('runtime: carries the CLI, the library, the plugin bundle and node_modules, but no benchmark, emulator or Kong stand-in', () => {
    const sources = copies(last).flatMap((c) => c.sources);
    for (const need of [
      '/app/package.json',
      '/app/bin',
      '/app/node_modules',
      '/app/dist/cli',
      '/app/dist/src',
      '/app/dist/plugins',
    ])
      expect(sources, need).toContain(need);
    expect(toolCopies(last)).toEqual([]);
  });
});

describe('docker-compose.yml builds each kinference service from the target that has its command', () => {
  const stages = new Set(readDockerfile('Dockerfile').map((i) => i.stageName));
  const built = Object.entries(services(loadCompose())).filter(
    ([, s]) => s.build !== undefined && obj(s.build, 'build').dockerfile === 'Dockerfile',
  );

  it.each(built.map(([name, s]) => [name, command(s)[0], obj(s.build, 'build').target] as const))(
    '%s (%s) builds target %s',
    (_name, sub, target) => {
      expect(stages.has(String(target))).toBe(true);
      expect(target).toBe(sub === 'collector' ? 'runtime' : 'tools');
    },
  );
});

/**
 * The runtime stage's files, copied from this build as its COPYs say (node_modules linked, not copied: the
 * image prunes devDependencies, and spec/01-unit/layout checks the library needs none), then run: the CLI
 * must start without the tools, offer the product commands, and load them.
 */
describe.skipIf(!exists('dist/cli/main.js'))('Dockerfile runtime stage, assembled from this build', () => {
  const last = finalStage(readDockerfile('Dockerfile'));
  const cli = (app: string, args: string[]) =>
    run(process.execPath, [join(app, 'bin/kinference.js'), ...args]);

  function assemble(): string {
    mkdirSync(repoPath('.tmp'), { recursive: true });
    const app = mkdtempSync(join(ROOT, '.tmp', 'runtime-image-'));
    for (const c of copies(last).filter((x) => x.from === 'build'))
      for (const src of c.sources) {
        const rel = posix.relative('/app', src);
        const dest = join(app, posix.relative('/app', c.dest));
        mkdirSync(join(dest, '..'), { recursive: true });
        if (rel === 'node_modules') symlinkSync(repoPath('node_modules'), dest, 'dir');
        else cpSync(repoPath(rel), dest, { recursive: true });
      }
    return app;
  }

  it('lists and runs the product commands, without demo, emulator or gateway', () => {
    const app = assemble();
    try {
      expect(exists('dist/bench') && exists('dist/emulator') && exists('dist/kong')).toBe(true); // this build has them
      const help = cli(app, ['--help']);
      expect(help.status, help.stderr).toBe(0);
      const commands = [...help.stdout.matchAll(/^ {2}([a-z-]+) \[/gm)].map((m) => m[1]);
      expect(commands).toEqual(['collector', 'explain', 'usage', 'validate', 'verify-tokenizer', 'help']);
      for (const sub of ['collector', 'explain', 'validate', 'verify-tokenizer', 'usage']) {
        const r = cli(app, [sub, '--help']);
        expect(r.status, `${sub} --help: ${r.stderr}`).toBe(0);
      }
      // Loads the command's implementation (router, tokenizers, config) from the image's files: one sentence.
      const missing = join(app, 'missing.yaml');
      const explain = cli(app, ['explain', '--config', missing, '--body', missing]);
      expect(explain.status, explain.stderr).toBe(2);
      expect(explain.stderr).toMatch(/^kinference: .*missing\.yaml/);
      expect(explain.stderr).not.toMatch(/at .*\.js:\d+:\d+/);
      // validate runs in the image (a CI step can use it): the plugin schema from the image's files.
      const kongYaml = join(app, 'kong.yaml');
      writeFileSync(kongYaml, 'plugins:\n  - name: kinference\n    config: {index: mongo}\n');
      const validate = cli(app, ['validate', kongYaml]);
      expect(validate.status, validate.stderr).toBe(1);
      expect(validate.stderr).toContain('config.index: expected one of: "redis", "memory" (got "mongo")');
      const emulator = cli(app, ['emulator', '--config', missing]);
      expect(emulator.status).toBe(1);
      expect(emulator.stderr).toContain("unknown command 'emulator'");
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  }, 120_000); // six CLI starts, slow on a loaded machine
});
