import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Collector } from '../../../src/collector/collector.js';
import { KubernetesDiscovery } from '../../../src/collector/discovery/kubernetes.js';
import { createLogger, silentLogger } from '../../../src/collector/logger.js';
import { createKvIndex } from '../../../src/index/index.js';
import type { KvIndex } from '../../../src/index/kv-index.js';
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

  constructor(endpoints: V1EndpointSlice['endpoints']) {
    this.slice = this.#slice(endpoints);
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/metrics')
        return void res.writeHead(200).end(vllmExposition({ '0': { running: 1 } }));
      if (url.pathname !== SLICES) return void res.writeHead(404).end();
      if (url.searchParams.get('watch') === 'true') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.flushHeaders();
        this.watchers.push(res);
        return;
      }
      this.listRequests.push(url.searchParams.get('labelSelector') ?? '');
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

  async close(): Promise<void> {
    for (const w of this.watchers) w.end();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
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
    index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kk8s' });
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
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: test, cluster: {server: "http://127.0.0.1:' +
          api.port +
          '", insecure-skip-tls-verify: true}}]',
        'users: [{name: test, user: {token: test-token}}]',
        'contexts: [{name: test, context: {cluster: test, user: test, namespace: llm}}]',
        'current-context: test',
      ].join('\n'),
    );
    const k8s = {
      namespace: NS,
      service: 'vllm',
      model: MODEL,
      http_port: api.port,
      kv_events_port: kvPort,
      kv_events_replay_port: replayPort,
      metrics_path: '/metrics',
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
});
