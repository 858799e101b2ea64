import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Collector } from '../../../src/collector/collector.js';
import { KubernetesDiscovery } from '../../../src/collector/discovery/kubernetes.js';
import { createLogger, silentLogger } from '../../../src/collector/logger.js';
import { type KvIndex } from '../../../src/index/index.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  MODEL,
  freshTokens,
  testSettings,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';
import { observerIndex } from '../../helpers/observer-index.js';

const NS = 'llm';
const SLICES = `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`;

/**
 * A stand-in for the Kubernetes API server (no cluster runs here): list and watch of
 * discovery.k8s.io/v1 EndpointSlices as client-node's informer uses them, plus the pods' /metrics.
 */
class FakeApiServer {
  server: Server;
  port = 0;
  version = 1;
  slice: V1EndpointSlice;
  watchers: ServerResponse[] = [];
  listRequests: string[] = [];
  watchRequests = 0;
  watchQueries: URLSearchParams[] = [];
  /** Answer lists with this status (403: an RBAC refusal, as the API server words it). */
  listStatus = 200;
  /** Answer watches with 200 and end them at once, as a misbehaving proxy might. */
  closeWatches = false;
  /** Answer watches with this status (403: a Role that grants list but not watch). */
  watchStatus = 200;

  constructor(endpoints: V1EndpointSlice['endpoints']) {
    this.slice = this.#slice(endpoints);
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/metrics')
        return void res.writeHead(200).end(vllmExposition({ '0': { running: 1 } }));
      if (url.pathname !== SLICES) return void res.writeHead(404).end();
      if (url.searchParams.get('watch') === 'true') {
        this.watchRequests++;
        this.watchQueries.push(url.searchParams);
        if (this.watchStatus !== 200)
          return void res
            .writeHead(this.watchStatus, { 'content-type': 'application/json' })
            .end(JSON.stringify({ kind: 'Status', message: 'watch refused', code: this.watchStatus }));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.flushHeaders();
        if (this.closeWatches) return void setTimeout(() => res.end(), 5);
        this.watchers.push(res);
        return;
      }
      this.listRequests.push(url.searchParams.get('labelSelector') ?? '');
      if (this.listStatus !== 200)
        return void res.writeHead(this.listStatus, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            message:
              'endpointslices.discovery.k8s.io is forbidden: User "system:serviceaccount:llm:collector" cannot ' +
              'list resource "endpointslices" in API group "discovery.k8s.io" in the namespace "llm"',
            reason: 'Forbidden',
            code: this.listStatus,
          }),
        );
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          kind: 'EndpointSliceList',
          apiVersion: 'discovery.k8s.io/v1',
          metadata: { resourceVersion: String(this.version) },
          items: [this.slice],
        }),
      );
    });
  }

  #slice(endpoints: V1EndpointSlice['endpoints']): V1EndpointSlice {
    return {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      addressType: 'IPv4',
      metadata: {
        name: 'vllm-abcde',
        namespace: NS,
        resourceVersion: String(this.version),
        labels: { 'kubernetes.io/service-name': 'vllm' },
      },
      endpoints,
      ports: [{ name: 'http', port: 8000, protocol: 'TCP' }],
    };
  }

  async listen(): Promise<void> {
    this.port = await freePort();
    await new Promise<void>((r) => this.server.listen(this.port, '127.0.0.1', () => r()));
  }

  /** A watch event: the slice's endpoints changed. */
  modify(endpoints: V1EndpointSlice['endpoints']): void {
    this.version++;
    this.slice = this.#slice(endpoints);
    for (const w of this.watchers) w.write(`${JSON.stringify({ type: 'MODIFIED', object: this.slice })}\n`);
  }

  /** The server ends every open watch (as it does after its timeout). */
  endWatches(): void {
    for (const w of this.watchers.splice(0)) w.end();
  }

  async close(): Promise<void> {
    for (const w of this.watchers) w.end();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const GRACE_MS = 1500;

/** A `kubernetes:` section for the suites that run discovery alone (no pod is ever connected to). */
const DISCOVERY_ONLY = {
  namespace: NS,
  service: 'vllm',
  model: MODEL,
  http_port: 8000,
  kv_events_port: 5557,
  metrics_path: '/metrics',
  data_parallel_size: 1,
  not_ready_grace_ms: 0,
};

/** A kubeconfig in `dir` for the API stand-in on `port`, with `user` (a token unless given). */
function writeKubeconfig(dir: string, port: number, user = '{token: test-token}'): string {
  const path = join(dir, 'kubeconfig');
  writeFileSync(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: test, cluster: {server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: test, user: ${user}}]`,
      'contexts: [{name: test, context: {cluster: test, user: test, namespace: llm}}]',
      'current-context: test',
    ].join('\n'),
  );
  return path;
}

const ep = (ip: string, pod: string): NonNullable<V1EndpointSlice['endpoints']>[number] => ({
  addresses: [ip],
  conditions: { ready: true },
  targetRef: { kind: 'Pod', name: pod, namespace: NS },
});

describe('Kubernetes discovery (EndpointSlices list + watch against an API stand-in)', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let api: FakeApiServer;
  let a: FakeVllmPublisher;
  let b: FakeVllmPublisher;
  let collector: Collector;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kk8s' });
    a = await new FakeVllmPublisher({ format: 'map' }, { host: '127.0.0.1' }).bind();
    const kvPort = Number(a.endpoint.split(':').pop());
    const replayPort = Number(a.replayEndpoint.split(':').pop());
    // Pod B listens on the same ports at another loopback address, as pods of one Deployment do.
    b = new FakeVllmPublisher({ format: 'map' }, { host: '127.0.0.2' });
    b.endpoint = `tcp://127.0.0.2:${kvPort}`;
    b.replayEndpoint = `tcp://127.0.0.2:${replayPort}`;
    await b.pub.bind(b.endpoint);
    await b.router!.bind(b.replayEndpoint);
    api = new FakeApiServer([ep('127.0.0.1', 'vllm-0')]);
    await api.listen();
    dir = mkdtempSync(join(tmpdir(), 'kinf-k8s-'));
    const kubeconfig = writeKubeconfig(dir, api.port);
    const k8s = {
      namespace: NS,
      service: 'vllm',
      model: MODEL,
      http_port: api.port,
      kv_events_port: kvPort,
      kv_events_replay_port: replayPort,
      metrics_path: '/metrics',
      data_parallel_size: 1,
      not_ready_grace_ms: GRACE_MS,
    };
    collector = new Collector(testSettings(), {
      index,
      discovery: new KubernetesDiscovery(
        k8s,
        process.env.KINF_TEST_LOG ? createLogger('debug') : silentLogger,
        kubeconfig,
        20,
      ),
      log: silentLogger,
      blockSizes: { [MODEL]: BS },
    });
    await collector.start();
  });

  afterAll(async () => {
    await collector?.stop();
    await a?.close();
    await b?.close();
    await api?.close();
    await index?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('follows the ready endpoints of the Service: pods that join are indexed, pods that leave are removed', async () => {
    expect(api.listRequests).toContain('kubernetes.io/service-name=vllm');
    await waitSubscribed(a, () => collector.worker('vllm-0'));
    const ta = freshTokens(2);
    await a.publish([{ type: 'BlockStored', hashes: [11n, 12n], parent: null, tokens: ta, blockSize: BS }]);
    await waitCached(index, 'vllm-0', ta, 2);

    await waitFor('watch connected', () => api.watchers.length > 0);
    api.modify([
      ep('127.0.0.1', 'vllm-0'),
      ep('127.0.0.2', 'vllm-1'),
      { ...ep('127.0.0.3', 'vllm-2'), conditions: { ready: false } },
    ]);
    await waitSubscribed(b, () => collector.worker('vllm-1'));
    expect(collector.worker('vllm-2')).toBeUndefined();
    const tb = freshTokens(1);
    await b.publish([{ type: 'BlockStored', hashes: [21n], parent: null, tokens: tb, blockSize: BS }]);
    await waitCached(index, 'vllm-1', tb, 1);
    expect((await index.listPods(MODEL)).map((p) => [p.podId, p.address])).toEqual([
      ['vllm-0', `127.0.0.1:${api.port}`],
      ['vllm-1', `127.0.0.2:${api.port}`],
    ]);

    api.modify([ep('127.0.0.2', 'vllm-1')]);
    await waitFor('vllm-0 removed from the index', async () =>
      (await index.listPods(MODEL)).every((p) => p.podId !== 'vllm-0'),
    );
    expect(collector.worker('vllm-0')).toBeUndefined();
    expect((await index.listPods(MODEL)).map((p) => p.podId)).toEqual(['vllm-1']);
  });

  it('keeps a pod that fails its readiness probe followed and indexed, out of routing, for not_ready_grace_ms', async () => {
    const state = async (id: string) => (await index.listPods(MODEL)).find((p) => p.podId === id);
    const notReady = { ...ep('127.0.0.1', 'vllm-0'), conditions: { ready: false, serving: false } };
    api.modify([ep('127.0.0.1', 'vllm-0'), ep('127.0.0.2', 'vllm-1')]);
    await waitSubscribed(a, () => collector.worker('vllm-0'));
    const ta = freshTokens(2);
    await a.publish([{ type: 'BlockStored', hashes: [31n, 32n], parent: null, tokens: ta, blockSize: BS }]);
    await waitCached(index, 'vllm-0', ta, 2);
    await waitFor('vllm-0 healthy (scraped)', async () => (await state('vllm-0'))?.healthy === true);

    api.modify([notReady, ep('127.0.0.2', 'vllm-1')]);
    await waitFor('vllm-0 written unhealthy', async () => (await state('vllm-0'))?.healthy === false);
    const worker = collector.worker('vllm-0');
    expect(collector.health().streams.find((st) => st.pod === 'vllm-0')).toMatchObject({ ready: false });
    expect(await collector.metrics.registry.metrics()).toContain(
      'kinference_collector_pod_ready{pod="vllm-0"} 0',
    );
    // Still followed: a block stored now is indexed, and the scrapes (healthy) do not put it back in routing.
    const tb = freshTokens(1);
    await a.publish([{ type: 'BlockStored', hashes: [33n], parent: 32n, tokens: tb, blockSize: BS }]);
    await waitCached(index, 'vllm-0', [...ta, ...tb], 3);
    expect((await state('vllm-0'))?.healthy).toBe(false);

    api.modify([ep('127.0.0.1', 'vllm-0'), ep('127.0.0.2', 'vllm-1')]);
    await waitFor('vllm-0 healthy again', async () => (await state('vllm-0'))?.healthy === true);
    // The same streams: nothing was cleared or replayed.
    expect(collector.worker('vllm-0')).toBe(worker);
    await waitCached(index, 'vllm-0', [...ta, ...tb], 3);

    const since = Date.now();
    api.modify([notReady, ep('127.0.0.2', 'vllm-1')]);
    await waitFor(
      'vllm-0 removed after its grace',
      async () => (await state('vllm-0')) === undefined,
      10_000,
    );
    expect(Date.now() - since).toBeGreaterThanOrEqual(GRACE_MS - 100);
    expect(collector.worker('vllm-0')).toBeUndefined();
    expect((await index.listPods(MODEL)).map((p) => p.podId)).toEqual(['vllm-1']);
  });
});

describe('Kubernetes discovery when the API server refuses or fails', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let api: FakeApiServer;
  let a: FakeVllmPublisher;
  let collector: Collector;
  let dir: string;
  const lines: Record<string, unknown>[] = [];
  const failFlag = (): string => join(dir, 'fail-credentials');

  beforeAll(async () => {
    redis = await startRedis();
    index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kk8s-fail' });
    // Left by an earlier collector: a refused list must not read as "no pods" and remove it.
    await index.upsertPodState({ model: MODEL, podId: 'vllm-old' }, { address: '10.9.9.9:8000' });
    a = await new FakeVllmPublisher({ format: 'map' }, { host: '127.0.0.1' }).bind();
    api = new FakeApiServer([ep('127.0.0.1', 'vllm-0')]);
    api.listStatus = 403;
    await api.listen();
    dir = mkdtempSync(join(tmpdir(), 'kinf-k8s-fail-'));
    // An exec credential plugin (as on EKS or GKE), run for every request, that fails while the flag exists.
    const cred = join(dir, 'cred.mjs');
    writeFileSync(
      cred,
      `import { existsSync } from 'node:fs';
if (existsSync(${JSON.stringify(failFlag())})) { process.stderr.write('sts throttled'); process.exit(1); }
process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 't' } }));
`,
    );
    const kubeconfig = writeKubeconfig(
      dir,
      api.port,
      `{exec: {apiVersion: client.authentication.k8s.io/v1, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(cred)}], interactiveMode: Never}}`,
    );
    const k8s = {
      namespace: NS,
      service: 'vllm',
      model: MODEL,
      http_port: api.port,
      kv_events_port: Number(a.endpoint.split(':').pop()),
      kv_events_replay_port: Number(a.replayEndpoint.split(':').pop()),
      metrics_path: '/metrics',
      data_parallel_size: 1,
      not_ready_grace_ms: 0,
    };
    const log = createLogger('debug', (l) => void lines.push(JSON.parse(l) as Record<string, unknown>));
    collector = new Collector(testSettings(), {
      index,
      discovery: new KubernetesDiscovery(k8s, log, kubeconfig, 20),
      log: silentLogger,
      blockSizes: { [MODEL]: BS },
      ownedModels: [MODEL],
    });
  });

  afterAll(async () => {
    await collector?.stop();
    await a?.close();
    await api?.close();
    await index?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const podIds = async (): Promise<string[]> => (await index.listPods(MODEL)).map((p) => p.podId);

  it('a refused list removes nothing and keeps /healthz not ready, with what to grant; then it follows the pods', async () => {
    await collector.start();
    expect(collector.health()).toMatchObject({ ok: false, discoverySynced: false });
    expect(await collector.metrics.registry.metrics()).toContain('kinference_collector_discovery_synced 0');
    expect(await podIds()).toEqual(['vllm-old']);
    const refused = lines.find((l) => l.level === 'error');
    expect(refused?.msg).toContain(
      'kubernetes: forbidden (403) to list and watch the EndpointSlices of Service vllm',
    );
    expect(refused?.msg).toContain('grant the collector');
    expect(refused?.msg).toContain('cannot list resource "endpointslices"');

    api.listStatus = 200;
    await waitFor('vllm-0 followed', () => collector.worker('vllm-0') !== undefined, 15_000);
    await waitSubscribed(a, () => collector.worker('vllm-0'));
    await waitFor('the stale pod removed', async () => (await podIds()).join() === 'vllm-0', 10_000);
    expect(collector.health()).toMatchObject({ ok: true, discoverySynced: true });
    const text = await collector.metrics.registry.metrics();
    expect(text).toContain('kinference_collector_discovery_synced 1');
    expect(text).toContain('kinference_collector_pod_ready{pod="vllm-0"} 1');
    expect(lines.some((l) => l.msg === 'kubernetes: listing and watching EndpointSlices again')).toBe(true);
  });

  it('a watch the server ends at once is reopened after a pause, not in a loop', async () => {
    await waitFor('watch open', () => api.watchers.length > 0, 20_000);
    api.closeWatches = true;
    const before = api.watchRequests;
    try {
      api.endWatches();
      // It does reopen (each reopening also runs the credential plugin, slow on a loaded machine) ...
      await waitFor('reopened twice', () => api.watchRequests - before >= 2, 20_000);
      // ... but after pauses of 1, 2, 4 s: a few in the next 3 s, not one per moment (a loop makes dozens).
      const reopened = api.watchRequests - before;
      await new Promise((r) => setTimeout(r, 3000));
      expect(api.watchRequests - before - reopened).toBeLessThanOrEqual(2);
    } finally {
      api.closeWatches = false;
      await waitFor('watch open again', () => api.watchers.length > 0, 20_000);
    }
  });

  it('a credential plugin failing on a watch reconnect is retried, not an unhandled rejection', async () => {
    await waitFor('watch open', () => api.watchers.length > 0, 20_000);
    writeFileSync(failFlag(), '');
    const errorsBefore = lines.filter((l) => l.level === 'error').length;
    api.endWatches();
    await waitFor('the failure logged', () => lines.filter((l) => l.level === 'error').length > errorsBefore);
    const failure = lines.filter((l) => l.level === 'error').at(-1);
    expect(failure?.msg).toContain('kubernetes: cannot list or watch the EndpointSlices of Service vllm');
    expect(failure).toMatchObject({ keeping: 'the pods of the last list' });
    expect(collector.worker('vllm-0')).toBeDefined();

    rmSync(failFlag());
    await waitFor('watch open again', () => api.watchers.length > 0, 15_000);
    api.modify([]);
    await waitFor('the change seen after the retry', async () => (await podIds()).length === 0, 10_000);
  });
});

describe('Kubernetes discovery: a watch connection lost without a word', () => {
  it('asks the server to end each watch in time, and reopens one that outlives that silently', async () => {
    const api = new FakeApiServer([ep('127.0.0.1', 'vllm-0')]);
    await api.listen();
    const dir = mkdtempSync(join(tmpdir(), 'kinf-k8s-silent-'));
    const kubeconfig = writeKubeconfig(dir, api.port);
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('debug', (l) => void lines.push(JSON.parse(l) as Record<string, unknown>));
    // The server never ends the watch and never writes: as a connection a NAT dropped looks to the client.
    const discovery = new KubernetesDiscovery(DISCOVERY_ONLY, log, kubeconfig, 20, 1);
    const seen: string[][] = [];
    try {
      await discovery.start((pods) => void seen.push(pods.map((p) => p.id)));
      expect(seen).toEqual([['vllm-0']]);
      await waitFor('watch open', () => api.watchRequests === 1);
      expect(api.watchQueries[0]!.get('timeoutSeconds')).toBe('1');
      await waitFor('the silent watch reopened', () => api.watchRequests >= 2, 10_000);
      expect(lines.find((l) => l.level === 'error')?.msg).toContain(
        'stayed open past its timeout with nothing from the API server (connection lost)',
      );
      // The new watch hears changes.
      await waitFor('watch open again', () => api.watchers.length >= 2);
      api.modify([ep('127.0.0.1', 'vllm-0'), ep('127.0.0.2', 'vllm-1')]);
      await waitFor('the change seen', () => seen.at(-1)?.length === 2);
    } finally {
      await discovery.stop();
      await api.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Kubernetes discovery: a watch refused after a good list', () => {
  it('backs off (1 s, 2 s, 4 s …), keeps the pods of the list, and says nothing is back until it is', async () => {
    const api = new FakeApiServer([ep('127.0.0.1', 'vllm-0')]);
    await api.listen();
    const dir = mkdtempSync(join(tmpdir(), 'kinf-k8s-nowatch-'));
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('debug', (l) => void lines.push(JSON.parse(l) as Record<string, unknown>));
    const discovery = new KubernetesDiscovery(DISCOVERY_ONLY, log, writeKubeconfig(dir, api.port), 20);
    const seen: string[][] = [];
    try {
      api.watchStatus = 403;
      await discovery.start((pods) => void seen.push(pods.map((p) => p.id)));
      expect(seen[0]).toEqual(['vllm-0']);
      await new Promise((r) => setTimeout(r, 6000));
      // The first watch, then retries 1, 2 (and perhaps 4) s apart, not one a second.
      expect(api.watchRequests).toBeGreaterThanOrEqual(3);
      expect(api.watchRequests).toBeLessThanOrEqual(4);
      const errors = lines.filter((l) => l.level === 'error').map((l) => String(l.msg));
      expect(errors[0]).toContain('forbidden (403)');
      expect(errors.map((m) => /retrying in (\d+) ms/.exec(m)?.[1])).toEqual(
        ['1000', '2000', '4000', '8000'].slice(0, errors.length),
      );
      expect(lines.some((l) => l.msg === 'kubernetes: listing and watching EndpointSlices again')).toBe(
        false,
      );
      expect(seen.every((ids) => ids.join() === 'vllm-0')).toBe(true); // never an empty list
    } finally {
      await discovery.stop();
      await api.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
