import { createServer, type Server } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Collector } from '../../../src/collector/collector.js';
import { StaticDiscovery } from '../../../src/collector/discovery/static.js';
import { startCollectorServer } from '../../../src/collector/http-server.js';
import { createLogger, type Logger } from '../../../src/collector/logger.js';
import { EventSubscriber } from '../../../src/collector/transport/subscriber.js';
import type { PodConfig } from '../../../src/config/fleet-config.js';
import { isKinferenceError } from '../../../src/core/errors.js';
import { type KvIndex } from '../../../src/index/index.js';
import type { BlockKey } from '../../../src/core/types.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import { BS, MODEL, testSettings } from '../../helpers/collector/collector-harness.js';
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';
import { observerIndex } from '../../helpers/observer-index.js';

const OTHER = 'Other/Model';
const KEY = '000000000000002a' as BlockKey;

/** A logger that keeps every record, to check what an operator would read. */
function recordingLogger(): { log: Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const log = createLogger('debug', (line) => void records.push(JSON.parse(line) as Record<string, unknown>));
  return { log, records };
}

/** A /metrics endpoint serving whatever `body()` returns now. */
async function metricsServer(body: () => string): Promise<{ server: Server; url: string }> {
  const port = await freePort();
  const server = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/plain' }).end(body()),
  );
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  return { server, url: `http://127.0.0.1:${port}/metrics` };
}

describe('collector: what an operator relies on (real Redis, ZMQ, HTTP)', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let collector: Collector | null = null;
  let pub: FakeVllmPublisher | null = null;
  let server: Server | null = null;
  let prefix = 0;

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await collector?.stop();
    await pub?.close();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    await index?.close();
    collector = null;
    pub = null;
    server = null;
  });
  afterAll(async () => {
    await redis?.stop();
  });

  const newIndex = (): KvIndex =>
    (index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: `kop${prefix++}` }));

  function start(pods: PodConfig[], log: Logger, ownedModels?: string[]): Collector {
    return (collector = new Collector(testSettings(), {
      index,
      discovery: new StaticDiscovery(pods),
      log,
      blockSizes: { [MODEL]: BS },
      ...(ownedModels ? { ownedModels } : {}),
    }));
  }

  it('removes at start the pods of its models that it does not follow, and only those', async () => {
    newIndex();
    const seed = async (model: string, podId: string): Promise<void> => {
      await index.upsertPodState({ model, podId }, { address: `${podId}:8000`, healthy: true, running: 4 });
      await index.apply({ model, podId }, [{ op: 'store', keys: [KEY], tier: 'GPU' }]);
    };
    await seed(MODEL, 'pod-gone'); // dropped from the static list while the collector was down
    await seed(MODEL, 'pod-a@dp1'); // pod-a ran with two DP ranks; now it has one
    await seed(MODEL, 'pod-a');
    await seed(OTHER, 'pod-x'); // another collector's model on the same Redis
    const { log, records } = recordingLogger();
    start([{ id: 'pod-a', model: MODEL, address: '127.0.0.1:18020' }], log, [MODEL]);
    await collector!.start();
    expect((await index.listPods(MODEL)).map((p) => p.podId)).toEqual(['pod-a']);
    expect((await index.listPods(OTHER)).map((p) => p.podId)).toEqual(['pod-x']);
    const removed = records.filter((r) => String(r.msg).startsWith('stale pod removed from the index'));
    expect(removed.map((r) => r.pod).sort()).toEqual(['pod-a@dp1', 'pod-gone']);
    expect(removed[0]).toMatchObject({ level: 'info', model: MODEL });
    // The lookup no longer offers the dead address's blocks.
    expect((await index.lookup(MODEL, [KEY])).pods.map((p) => p.state.podId)).toEqual(['pod-a']);
  });

  it('without owned models it removes nothing it did not run', async () => {
    newIndex();
    await index.upsertPodState({ model: MODEL, podId: 'pod-gone' }, { address: 'x:1' });
    start([{ id: 'pod-a', model: MODEL, address: '127.0.0.1:18021' }], recordingLogger().log);
    await collector!.start();
    expect((await index.listPods(MODEL)).map((p) => p.podId)).toEqual(['pod-a', 'pod-gone']);
  });

  it('a scrape without the load series marks the pod unhealthy and leaves its last scrape time, once logged', async () => {
    newIndex();
    let renamed = false;
    const m = await metricsServer(() => {
      const text = vllmExposition({ '0': { running: 5, waiting: 3, kv: 0.5 } });
      return renamed
        ? text.replace(/vllm:num_requests_(running|waiting)/g, 'vllm:requests_$1_renamed')
        : text;
    });
    server = m.server;
    const { log, records } = recordingLogger();
    start([{ id: 'pod-m', model: MODEL, address: '127.0.0.1:18022', metrics: m.url }], log);
    await collector!.start();
    const state = async (): Promise<Record<string, unknown> | undefined> =>
      (await index.listPods(MODEL)).find((p) => p.podId === 'pod-m') as Record<string, unknown> | undefined;
    await waitFor('scraped', async () => (await state())?.waiting === 3);

    renamed = true;
    await waitFor('unhealthy', async () => (await state())?.healthy === false);
    const frozen = (await state())!.lastScrapeAtMs as number;
    for (let i = 0; i < 3; i++) {
      const seen = collector!.scraper('pod-m')!.lastPod;
      await waitFor('another scrape', () => collector!.scraper('pod-m')!.lastPod !== seen);
    }
    expect(await state()).toMatchObject({ healthy: false, lastScrapeAtMs: frozen });
    expect(collector!.scraper('pod-m')!.healthy).toBe(false);
    expect(collector!.health().streams[0]!.healthy).toBe(false);
    const warned = records.filter((r) => String(r.msg).includes('lack series the router needs'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({
      level: 'warn',
      pod: 'pod-m',
      missing: ['vllm:num_requests_running', 'vllm:num_requests_waiting'],
    });

    renamed = false;
    await waitFor('healthy again', async () => (await state())?.healthy === true);
    expect((await state())!.lastScrapeAtMs as number).toBeGreaterThan(frozen);
    expect(records.some((r) => String(r.msg).includes('carry the load series again'))).toBe(true);
  });

  it('warns when the engine computes prompts but no KV event arrives (topic mismatch)', async () => {
    newIndex();
    let queries = 0;
    const m = await metricsServer(() => vllmExposition({ '0': { queries, hits: 0 } }));
    server = m.server;
    pub = await new FakeVllmPublisher({ format: 'map' }, { topic: '' }).bind(); // vLLM's default topic
    const { log, records } = recordingLogger();
    start(
      [
        {
          id: 'pod-t',
          model: MODEL,
          address: '127.0.0.1:18023',
          kv_events: pub.endpoint,
          kv_events_topic: 'kv-events',
          metrics: m.url,
        },
      ],
      log,
    );
    await collector!.start();
    await waitFor('first scrape', () => collector!.scraper('pod-t')!.lastPod !== null);
    const silent = (): Record<string, unknown> | undefined =>
      records.find((r) => String(r.msg).startsWith('no KV event received'));
    await waitFor(
      'warning',
      async () => {
        await pub!.publish([]);
        queries += 256; // the engine computes prompts; their events go out on topic "", which nobody hears
        return silent();
      },
      20_000, // the warning waits 5 s of silence after the tokens (EventSilenceWatch.graceMs)
    );
    expect(collector!.worker('pod-t')!.stats.framesReceived).toBe(0);
    expect(silent()).toMatchObject({
      level: 'warn',
      pod: 'pod-t',
      endpoint: pub.endpoint,
      topic: 'kv-events',
    });
    expect(String(silent()!.check)).toContain('"topic" equal to kv_events_topic');
    expect(String(silent()!.check)).toContain('enable_kv_cache_events');
    expect(String(silent()!.check)).toContain('prefix caching');
    expect(records.filter((r) => String(r.msg).startsWith('no KV event received'))).toHaveLength(1);
  });

  it('warns once when a pod runs with prefix caching off, and again only after it was back on', async () => {
    newIndex();
    let caching = 'False';
    const m = await metricsServer(() =>
      vllmExposition(
        { '0': { running: 1 } },
        `vllm:cache_config_info{block_size="16",enable_prefix_caching="${caching}",num_gpu_blocks="100"} 1.0\n`,
      ),
    );
    server = m.server;
    const { log, records } = recordingLogger();
    start([{ id: 'pod-p', model: MODEL, address: '127.0.0.1:18024', metrics: m.url }], log);
    await collector!.start();
    const warned = (): Record<string, unknown>[] =>
      records.filter((r) => String(r.msg).startsWith('prefix caching is off'));
    await waitFor('warning', () => warned().length > 0);
    for (let i = 0; i < 3; i++) {
      const seen = collector!.scraper('pod-p')!.lastPod;
      await waitFor('another scrape', () => collector!.scraper('pod-p')!.lastPod !== seen);
    }
    expect(warned()).toHaveLength(1);
    expect(warned()[0]).toMatchObject({ level: 'warn', pod: 'pod-p', url: m.url });
    caching = 'True';
    await waitFor('on again', () => collector!.scraper('pod-p')!.lastPod?.prefixCaching === true);
    caching = 'False';
    await waitFor('warned again', () => warned().length === 2);
  });

  it('an endpoint ZMQ refuses is reported, not thrown', async () => {
    const errors: unknown[] = [];
    const sub = new EventSubscriber({
      endpoint: 'tcp://127.0.0.1:notaport',
      topic: '',
      receiveHighWaterMark: 10,
      onMessage: () => {},
      onConnection: () => {},
      onError: (e) => errors.push(e),
    });
    expect(() => sub.start()).not.toThrow();
    await sub.close();
    expect(errors).toHaveLength(1);
    expect(isKinferenceError(errors[0], 'KINF_ERR_CONFIG')).toBe(true);
    expect((errors[0] as Error).message).toContain('"tcp://127.0.0.1:notaport"');
  });

  it('a busy listen port is a config error naming the address', async () => {
    newIndex();
    start([], recordingLogger().log);
    const first = await startCollectorServer(collector!, '127.0.0.1:0');
    try {
      const err = await startCollectorServer(collector!, first.address).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isKinferenceError(err, 'KINF_ERR_CONFIG')).toBe(true);
      expect((err as Error).message).toBe(
        `collector.listen ${first.address}: address already in use: another process listens there (pick another port, or 0 for a free one)`,
      );
    } finally {
      await first.close();
    }
  });
});
