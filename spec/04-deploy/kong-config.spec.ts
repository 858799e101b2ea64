import { describe, expect, it } from 'vitest';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { join } from 'node:path';
import { PluginConfigSchema } from '../../src/config/plugin-config.js';
import { toKongSchema } from '../../src/config/to-kong-schema.js';
import { loadDeclarative } from '../../kong/stand-in/declarative.js';
import { processPluginConfig } from '../../kong/stand-in/process-config.js';
import { loadFleetConfig } from '../../src/config/fleet-config.js';
import { kinferencePluginConfig, kinferenceRoute, kongYaml } from './support/kong-yaml.js';
import { environment, loadCompose, services } from './support/compose.js';
import { exists, readText, repoPath, ROOT } from './support/repo.js';
import { run, works } from './support/tools.js';
import { runtimePackage } from './support/runtime-package.js';

const KNOWN_FIELDS = new Set(Object.keys(PluginConfigSchema.properties));
const IMAGE_JS_PLUGINS = '/usr/local/kong/js-plugins/'; // kong/Dockerfile: runtime externals live here

describe('kong/kong.yaml', () => {
  const doc = kongYaml();
  const { service, route, config } = kinferenceRoute(doc);

  it('is declarative config format 3.0 with only what the Kong stand-in and DB-less Kong load', () => {
    expect(doc._format_version).toBe('3.0');
    expect(Object.keys(doc).sort()).toEqual(['_format_version', 'services']);
  });

  it('service: a fail-open target, no retries after set_target, long reads', () => {
    expect(service.name).toBe('vllm');
    expect(service.retries).toBe(0);
    expect(Number(service.read_timeout)).toBeGreaterThanOrEqual(300_000);
    expect(typeof service.url).toBe('string');
  });

  it('route: POST chat completions, path kept, responses streamed, requests buffered', () => {
    expect(route.paths).toContain('/v1/chat/completions');
    expect(route.methods).toEqual(['POST']);
    expect(route.strip_path).toBe(false);
    expect(route.response_buffering).toBe(false);
    expect(route.request_buffering ?? true).toBe(true); // the plugin reads the body
  });

  it('plugin config: only fields the plugin has, and valid against PluginConfigSchema', () => {
    expect(Object.keys(config).filter((k) => !KNOWN_FIELDS.has(k))).toEqual([]);
    const cfg = kinferencePluginConfig();
    expect(cfg.index).toBe('redis');
    expect(cfg.block_size).toBe(16);
  });

  it('loads in the Kong stand-in, whose schema processing (Kong rules) accepts the plugin config', () => {
    const decl = loadDeclarative(repoPath('kong/kong.yaml'));
    const plugin = decl.plugins.find((p) => p.name === 'kinference');
    expect(plugin?.routeId).toBe(decl.routes.find((r) => r.name === 'chat')?.id);
    expect(decl.routes.find((r) => r.name === 'chat')?.responseBuffering).toBe(false);
    expect(decl.services[0]?.retries).toBe(0);
    const processed = processPluginConfig(toKongSchema(PluginConfigSchema), plugin!.config);
    expect(processed).toEqual(expect.objectContaining({ ok: true }));
  });

  it('plugin config: tokenizer files are where the Kong image installs them', () => {
    const cfg = kinferencePluginConfig();
    const deps = Object.keys(runtimePackage().dependencies);
    for (const spec of [cfg.tokenizer, cfg.chat_template]) {
      const path = spec.replace(/^hf:/, '');
      expect(path.startsWith(`${IMAGE_JS_PLUGINS}node_modules/`), spec).toBe(true);
      const inModules = path.slice(`${IMAGE_JS_PLUGINS}node_modules/`.length);
      expect(
        deps.some((d) => inModules.startsWith(`${d}/`)),
        `${spec}: package installed in the image`,
      ).toBe(true);
      expect(exists(join('node_modules', inModules)), spec).toBe(true);
    }
  });

  it('plugin config: Redis, Jaeger and pods are the compose services', () => {
    const cfg = kinferencePluginConfig();
    const svcs = services(loadCompose());
    const redis = new URL(cfg.redis_url);
    expect(svcs[redis.hostname]?.image).toMatch(/^redis:/);
    expect(Number(redis.port || 6379)).toBe(6379);
    const otlp = new URL(cfg.otlp_endpoint!);
    expect(otlp.hostname).toBe('jaeger');
    expect(otlp.port).toBe('4318');
    expect(otlp.pathname).toBe('/v1/traces');
    expect(environment(svcs.jaeger!).COLLECTOR_OTLP_ENABLED).toBe('true');

    for (const fleetFile of ['deploy/compose/fleet.vllm.yaml', 'deploy/compose/fleet.emulator.yaml']) {
      const fleet = loadFleetConfig(repoPath(fleetFile));
      expect(new URL(fleet.redis_url).host, fleetFile).toBe(redis.host);
      expect(Object.keys(cfg.model_pods ?? {}), fleetFile).toEqual(Object.keys(fleet.models));
      const addresses = (fleet.pods ?? []).map((p) => p.address).sort();
      for (const [model, pods] of Object.entries(cfg.model_pods ?? {}))
        expect([...pods].sort(), `${fleetFile} ${model}`).toEqual(addresses);
      expect(addresses, 'service url = a pod').toContain(new URL(String(service.url)).host);
      for (const m of Object.values(fleet.models)) expect(m.block_size).toBe(cfg.block_size);
    }
  });
});

describe('decK validates kong/kong.yaml', () => {
  const hasDeck = works('deck', ['version']);
  // decK >= 1.28 has `deck file validate`; Debian's decK (1.4) only `deck validate -s`.
  const validate = (file: string) =>
    works('deck', ['file', 'validate', '--help'])
      ? run('deck', ['file', 'validate', file])
      : run('deck', ['validate', '-s', file]);

  it.skipIf(!hasDeck)('accepts kong/kong.yaml', () => {
    const r = validate('kong/kong.yaml');
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it.skipIf(!hasDeck)('rejects a misspelt route field (the check above can fail)', () => {
    mkdirSync(join(ROOT, '.tmp'), { recursive: true });
    const dir = mkdtempSync(join(ROOT, '.tmp', 'deck-'));
    try {
      const file = join(dir, 'kong.yaml');
      writeFileSync(
        file,
        readText('kong/kong.yaml').replace('response_buffering: false', 'response_bufering: false'),
      );
      const r = validate(file);
      expect(r.status).not.toBe(0);
      expect(r.stdout + r.stderr).toMatch(/response_bufering/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  if (!hasDeck)
    it.skip('decK checks: skipped, `deck` is not installed (apt-get install deck; .ci/run installs it)', () => {});
});

describe('the plugin bundle answers the query command Kong runs', () => {
  const bundle = 'dist/plugins/kinference/kinference.js';
  const built = exists(bundle);

  it.skipIf(!built)('dumps one plugin named kinference whose schema has every field kong.yaml sets', () => {
    // A directory with only the bundle, as in the image; inside the repo so node_modules resolves.
    mkdirSync(join(ROOT, '.tmp'), { recursive: true });
    const dir = mkdtempSync(join(ROOT, '.tmp', 'plugins-'));
    try {
      mkdirSync(join(dir, 'kinference'));
      copyFileSync(repoPath(bundle), join(dir, 'kinference', 'kinference.js'));
      // The image's js-plugins/package.json ("type": "commonjs"); the repo's own says "module".
      writeFileSync(join(dir, 'package.json'), JSON.stringify(runtimePackage()));
      const r = run(process.execPath, [
        'node_modules/kong-pdk/bin/kong-js-pluginserver',
        '-d',
        join(dir, 'kinference'),
        '--dump-all-plugins',
      ]);
      expect(r.status, r.stderr).toBe(0);
      const dump = JSON.parse(r.stdout) as {
        Name: string;
        Schema: { fields: { config: { fields: Record<string, unknown>[] } }[] };
      }[];
      expect(dump).toHaveLength(1);
      expect(dump[0]!.Name).toBe('kinference');
      const fields = new Set(dump[0]!.Schema.fields[0]!.config.fields.flatMap((f) => Object.keys(f)));
      for (const k of Object.keys(kinferenceRoute().config)) expect(fields.has(k), k).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!built)(
    'requires at run time only Node built-ins and the packages the image installs beside it',
    () => {
      const text = readFileSync(repoPath(bundle), 'utf8');
      const bare = new Set(
        [...text.matchAll(/\brequire\(\s*["']([^"'./][^"']*)["']\s*\)/g)]
          .map((m) => m[1]!)
          .filter((n) => !n.startsWith('node:') && !builtinModules.includes(n.split('/')[0]!))
          .map((n) => (n.startsWith('@') ? n.split('/').slice(0, 2).join('/') : n.split('/')[0]!)),
      );
      // A require esbuild left unresolved must sit in a try/catch (esbuild fails the build otherwise): it is
      // optional, like debug's require('supports-color'). Every require that resolves here must resolve in Kong.
      const fromRepo = createRequire(repoPath('package.json'));
      const resolvable = (n: string) => {
        try {
          fromRepo.resolve(n);
          return true;
        } catch {
          return false;
        }
      };
      const installed = Object.keys(runtimePackage().dependencies);
      expect([...bare].filter((n) => resolvable(n) && !installed.includes(n))).toEqual([]);
    },
  );
  if (!built) it.skip('bundle checks: skipped, run `npm run build` first (npm test does)', () => {});
});
