import { describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PluginConfigSchema } from '../../src/config/plugin-config.js';
import { toKongSchema } from '../../src/config/to-kong-schema.js';
import { processPluginConfig } from '../../kong/stand-in/process-config.js';
import { validateConfig } from '../../src/config/validate.js';
import { parseFleetConfig } from '../../src/config/fleet-config.js';
import {
  exists,
  isObj,
  obj,
  readYaml,
  readYamlDocs,
  repoPath,
  ROOT,
  strs,
  type Obj,
} from './support/repo.js';
import { flagValue } from './support/compose.js';
import { kinferencePluginConfig } from './support/kong-yaml.js';
import { run, works } from './support/tools.js';

const DIR = 'deploy/kubernetes';

interface Manifest {
  file: string;
  doc: Obj;
}

function yamlFiles(dir: string): string[] {
  return readdirSync(repoPath(dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? yamlFiles(join(dir, e.name)) : e.name.endsWith('.yaml') ? [join(dir, e.name)] : [],
  );
}

const isKustomization = (f: string) => f.endsWith('kustomization.yaml');
const isHelmValues = (f: string) => f.endsWith('-values.yaml');
const manifestFiles = yamlFiles(DIR).filter((f) => !isKustomization(f) && !isHelmValues(f));
const manifests: Manifest[] = manifestFiles.flatMap((file) =>
  readYamlDocs(file).map((d, i) => ({ file, doc: obj(d, `${file}#${i}`) })),
);

function find(kind: string, name: string): Obj {
  const m = manifests.find((x) => x.doc.kind === kind && obj(x.doc.metadata, 'metadata').name === name);
  if (!m) throw new Error(`no ${kind} ${name} under ${DIR}`);
  return m.doc;
}

type Model = new (data: never) => { validate(): void };
const MODELS: Record<string, Model> = {
  'v1/ServiceAccount': ServiceAccount as unknown as Model,
  'v1/ConfigMap': ConfigMap as unknown as Model,
  'v1/Service': Service as unknown as Model,
  'apps/v1/Deployment': Deployment as unknown as Model,
  'rbac.authorization.k8s.io/v1/Role': Role as unknown as Model,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding as unknown as Model,
  'networking.k8s.io/v1/Ingress': Ingress as unknown as Model,
};

type Container = {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  [k: string]: unknown;
};

function podSpec(deploy: Obj): Obj {
  return obj(obj(obj(deploy.spec, 'spec').template, 'template').spec, 'template.spec');
}

function container(deploy: Obj): Container {
  return (podSpec(deploy).containers as Container[])[0]!;
}

function containerPort(c: Container, name: string): number {
  const p = c.ports?.find((x) => x.name === name);
  if (!p) throw new Error(`container ${c.name} has no port ${name}`);
  return p.containerPort;
}

function kvConfig(args: string[]): { endpoint: string; replay_endpoint: string; topic: string } {
  return JSON.parse(flagValue(args, '--kv-events-config')!) as {
    endpoint: string;
    replay_endpoint: string;
    topic: string;
  };
}

const portOf = (endpoint: string) => Number(/:(\d+)$/.exec(endpoint)?.[1]);

const collector = find('Deployment', 'kinference-collector');
const configMap = find('ConfigMap', 'kinference-collector');
const fleetText = String(obj(configMap.data, 'data')['fleet.yaml']);
const fleet = parseFleetConfig(
  parse(fleetText.replace('__POD_NAMESPACE__', 'test-ns')),
  'configmap fleet.yaml',
  '/app',
);
const vllm = find('Deployment', 'vllm');
const vllmService = find('Service', 'vllm');

describe('deploy/kubernetes: manifests', () => {
  it('are valid API objects (kubernetes-models schemas) or a KongPlugin', () => {
    for (const { file, doc } of manifests) {
      const key = `${String(doc.apiVersion)}/${String(doc.kind)}`;
      if (key === 'configuration.konghq.com/v1/KongPlugin') continue; // checked below
      const Model = MODELS[key];
      expect(Model, `${file}: unexpected ${key}`).toBeDefined();
      expect(() => new Model!(doc as never).validate(), `${file}: ${key}`).not.toThrow();
    }
  });

  it('the schema check can fail: a string containerPort is rejected', () => {
    const broken = structuredClone(collector);
    (podSpec(broken).containers as Container[])[0]!.ports = [
      { name: 'metrics', containerPort: 'x' as unknown as number },
    ];
    expect(() => new Deployment(broken as never).validate()).toThrow(/containerPort/);
  });

  it('are namespace-agnostic (applied with -n or a kustomize namespace)', () => {
    for (const { file, doc } of manifests)
      expect(obj(doc.metadata, 'metadata').namespace, file).toBeUndefined();
  });

  it('are all reachable from deploy/kubernetes/kustomization.yaml', () => {
    const listed = new Set<string>();
    const walk = (dir: string) => {
      const k = obj(readYaml(join(dir, 'kustomization.yaml')), `${dir}/kustomization.yaml`);
      for (const r of strs(k.resources, 'resources')) {
        const p = join(dir, r);
        if (exists(join(p, 'kustomization.yaml'))) walk(p);
        else {
          expect(exists(p), p).toBe(true);
          listed.add(p);
        }
      }
    };
    walk(DIR);
    expect([...listed].sort()).toEqual([...manifestFiles].sort());
  });
});

describe('deploy/kubernetes: collector', () => {
  it('may list and watch EndpointSlices (discovery.k8s.io) through its ServiceAccount, and nothing else', () => {
    const role = find('Role', 'kinference-collector');
    const rules = role.rules as { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    expect(rules).toEqual([
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
    ]);
    const binding = find('RoleBinding', 'kinference-collector');
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'kinference-collector',
    });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'kinference-collector' }]);
    find('ServiceAccount', 'kinference-collector');
    expect(podSpec(collector).serviceAccountName).toBe('kinference-collector');
  });

  it('is the only writer: one replica, never two during a rollout', () => {
    const spec = obj(collector.spec, 'spec');
    expect(spec.replicas).toBe(1);
    expect(spec.strategy).toEqual({ type: 'Recreate' });
  });

  it('reads the ConfigMap fleet with kubernetes discovery in its own namespace', () => {
    expect(fleet.kubernetes?.namespace).toBe('test-ns');
    expect(fleet.pods).toBeUndefined();
    const c = container(collector);
    const env = (c.env as { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[]).find(
      (e) => e.name === 'POD_NAMESPACE',
    );
    expect(env?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
    const mounts = c.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[];
    const volumes = podSpec(collector).volumes as {
      name: string;
      configMap?: { name: string };
      emptyDir?: object;
    }[];
    const cfgMount = mounts.find(
      (m) => volumes.find((v) => v.name === m.name)?.configMap?.name === 'kinference-collector',
    );
    expect(cfgMount?.mountPath).toBe('/etc/kinference');
    const tmp = mounts.find((m) => m.mountPath === '/tmp');
    expect(volumes.find((v) => v.name === tmp?.name)?.emptyDir, '/tmp is writable').toBeDefined();
    expect(c.command).toEqual(['/bin/sh', '-c']);
    expect(c.args?.[0]).toMatch(
      /exec node \/app\/bin\/kinference\.js collector --config \/tmp\/fleet\.yaml$/,
    );
  });

  it('start-up command substitutes the namespace into a fleet file that loads', () => {
    mkdirSync(join(ROOT, '.tmp'), { recursive: true });
    const dir = mkdtempSync(join(ROOT, '.tmp', 'k8s-'));
    try {
      writeFileSync(join(dir, 'fleet.yaml'), fleetText);
      // The container's own shell line, up to the exec, with its two paths moved into the temp dir.
      const line = container(collector)
        .args![0]!.split('&&')[0]!
        .replace('/etc/kinference/fleet.yaml', join(dir, 'fleet.yaml'))
        .replace('/tmp/fleet.yaml', join(dir, 'out.yaml'));
      const r = run('sh', ['-c', `POD_NAMESPACE=inference-prod; ${line}`]);
      expect(r.status, r.stderr).toBe(0);
      const out = obj(readYaml(relative(ROOT, join(dir, 'out.yaml'))), 'out');
      expect(obj(out.kubernetes, 'kubernetes').namespace).toBe('inference-prod');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('serves /metrics and /healthz on the port its Service and probes use', () => {
    const c = container(collector);
    const listen = fleet.collector!.listen;
    expect(listen.startsWith('0.0.0.0:')).toBe(true);
    expect(containerPort(c, 'metrics')).toBe(Number(listen.split(':')[1]));
    const svc = find('Service', 'kinference-collector');
    expect(obj(svc.spec, 'spec').ports).toEqual([{ name: 'metrics', port: 9090, targetPort: 'metrics' }]);
    expect(obj(svc.spec, 'spec').selector).toEqual(
      obj(obj(collector.spec, 'spec').selector, 's').matchLabels,
    );
    expect(obj(obj(c.readinessProbe, 'readiness').httpGet, 'httpGet')).toEqual({
      path: '/healthz',
      port: 'metrics',
    });
  });

  it('runs as the image user, read-only, with the tokenizer files the image contains', () => {
    const sc = obj(podSpec(collector).securityContext, 'securityContext');
    expect(sc.runAsNonRoot).toBe(true);
    expect(sc.runAsUser).toBe(1000); // `node` in node:20-bookworm-slim (Dockerfile USER node)
    expect(obj(container(collector).securityContext, 'sc').readOnlyRootFilesystem).toBe(true);
    for (const m of Object.values(fleet.models))
      for (const spec of [m.tokenizer, m.chat_template])
        expect(exists(spec.replace(/^hf:\/app\//, '')), spec).toBe(true);
  });
});

describe('deploy/kubernetes: the vLLM example matches the collector and the plugin', () => {
  const c = container(vllm);
  const args = [...(c.command ?? []), ...(c.args ?? [])];
  const kv = kvConfig(args);
  const k8s = fleet.kubernetes!;

  it('serves the model and block size the fleet names', () => {
    expect(c.command).toEqual(['vllm', 'serve']);
    expect(flagValue(args, '--served-model-name')).toBe(k8s.model);
    expect(Number(flagValue(args, '--block-size'))).toBe(fleet.models[k8s.model]!.block_size);
    expect(args).toContain('--enable-prefix-caching');
    expect(args).toContain('--enable-prompt-tokens-details');
  });

  it('binds KV events and replay on the ports the collector connects to', () => {
    expect(kv.endpoint).toMatch(/^tcp:\/\/\*:/); // vLLM binds only for `*` (or ::, ipc, inproc)
    expect(kv.replay_endpoint).toMatch(/^tcp:\/\/\*:/);
    expect(portOf(kv.endpoint)).toBe(k8s.kv_events_port);
    expect(portOf(kv.replay_endpoint)).toBe(k8s.kv_events_replay_port);
    expect(kv.topic).toBe(k8s.kv_events_topic);
    expect(containerPort(c, 'kv-events')).toBe(k8s.kv_events_port);
    expect(containerPort(c, 'kv-replay')).toBe(k8s.kv_events_replay_port);
    expect(containerPort(c, 'http')).toBe(k8s.http_port);
    expect(Number(flagValue(args, '--port'))).toBe(k8s.http_port);
  });

  it("is the Service the collector follows, selecting the Deployment's pods; Kong does not retry", () => {
    expect(k8s.service).toBe('vllm');
    const spec = obj(vllmService.spec, 'spec');
    const labels = obj(obj(obj(vllm.spec, 'spec').template, 't').metadata, 'm').labels;
    expect(labels).toEqual(expect.objectContaining(obj(spec.selector, 'selector')));
    const annotations = obj(obj(vllmService.metadata, 'metadata').annotations, 'annotations');
    expect(annotations['konghq.com/retries']).toBe('0');
    expect(Number(annotations['konghq.com/read-timeout'])).toBeGreaterThanOrEqual(300_000);
    expect(obj(obj(c.resources, 'resources').limits, 'limits')['nvidia.com/gpu']).toBe(1);
  });

  it('has the Redis the fleet names', () => {
    const redis = new URL(fleet.redis_url);
    const ports = (obj(find('Service', redis.hostname).spec, 'spec').ports as { port: number }[]).map(
      (p) => p.port,
    );
    expect(ports).toContain(Number(redis.port || 6379));
  });
});

describe('deploy/kubernetes/kong: KongPlugin and Ingress for Kong Ingress Controller', () => {
  const plugin = find('KongPlugin', 'kinference');
  const cfgRaw = obj(plugin.config, 'config');
  const cfg = validateConfig(PluginConfigSchema, cfgRaw, 'KongPlugin kinference');
  const ingress = find('Ingress', 'vllm-chat');

  it('configures the kinference plugin with fields it has, as Kong would process them', () => {
    expect(plugin.plugin).toBe('kinference');
    const known = new Set(Object.keys(PluginConfigSchema.properties));
    expect(Object.keys(cfgRaw).filter((k) => !known.has(k))).toEqual([]);
    expect(processPluginConfig(toKongSchema(PluginConfigSchema), cfgRaw)).toEqual(
      expect.objectContaining({ ok: true }),
    );
  });

  it('uses the same tokenizer, template and block size as kong/kong.yaml and the fleet', () => {
    const kong = kinferencePluginConfig();
    expect([cfg.tokenizer, cfg.chat_template, cfg.block_size]).toEqual([
      kong.tokenizer,
      kong.chat_template,
      kong.block_size,
    ]);
    expect(Object.keys(cfg.model_pods ?? {})).toEqual([fleet.kubernetes!.model]);
    expect(cfg.block_size).toBe(fleet.models[fleet.kubernetes!.model]!.block_size);
  });

  it('reaches Redis and vLLM by fully qualified names (Kong runs in another namespace)', () => {
    const redis = new URL(cfg.redis_url);
    expect(redis.hostname).toMatch(
      new RegExp(`^${new URL(fleet.redis_url).hostname}\\.[a-z0-9-]+\\.svc\\.cluster\\.local$`),
    );
    for (const pods of Object.values(cfg.model_pods ?? {}))
      for (const p of pods) expect(p).toMatch(/^vllm\.[a-z0-9-]+\.svc\.cluster\.local:8000$/);
  });

  it('attaches the plugin to a streaming POST route on the vLLM Service', () => {
    const a = obj(obj(ingress.metadata, 'metadata').annotations, 'annotations');
    expect(String(a['konghq.com/plugins']).split(',')).toContain('kinference');
    expect(a['konghq.com/response-buffering']).toBe('false');
    expect(a['konghq.com/strip-path']).toBe('false');
    expect(a['konghq.com/methods']).toBe('POST');
    const spec = obj(ingress.spec, 'spec');
    expect(spec.ingressClassName).toBe('kong');
    const paths = (
      spec.rules as {
        http: { paths: { path: string; backend: { service: { name: string; port: { name: string } } } }[] };
      }[]
    )[0]!.http.paths;
    expect(paths.map((p) => p.path)).toContain('/v1/chat/completions');
    const svcPorts = (obj(vllmService.spec, 'spec').ports as { name: string }[]).map((p) => p.name);
    for (const p of paths) {
      expect(p.backend.service.name).toBe('vllm');
      expect(svcPorts).toContain(p.backend.service.port.name);
    }
  });
});

describe('deploy/kubernetes: kustomize build', () => {
  const hasKubectl = works('kubectl', ['version', '--client']);
  it.skipIf(!hasKubectl)('builds, and a namespace overlay puts every object in that namespace', () => {
    mkdirSync(join(ROOT, '.tmp'), { recursive: true });
    const dir = mkdtempSync(join(ROOT, '.tmp', 'kustomize-'));
    try {
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        `namespace: test-ns\nresources:\n  - ${relative(dir, repoPath(DIR))}\n`,
      );
      const r = run('kubectl', ['kustomize', dir]);
      expect(r.status, r.stderr).toBe(0);
      const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
      expect(docs).toHaveLength(manifests.length);
      for (const d of docs) expect(isObj(d.metadata) && d.metadata.namespace, String(d.kind)).toBe('test-ns');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  if (!hasKubectl) it.skip('kustomize build: skipped, kubectl is not installed', () => {});
});
