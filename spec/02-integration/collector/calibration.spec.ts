import { createServer, type Server } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Collector } from '../../../src/collector/collector.js';
import { createKvIndex } from '../../../src/index/index.js';
import type { KvIndex } from '../../../src/index/kv-index.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import { MODEL, startCollector } from '../../helpers/collector/collector-harness.js';
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';

// The collector's calibration end to end: a pod's /metrics finishes one prefill per scrape, first on a busy
// pod (3 running) at 0.4 ms/token, then alone at 0.3 ms/token. The estimate goes to the index (what the
// router reads) and to the collector's own /metrics, with what set it.
describe('collector calibration from /metrics (real Redis, HTTP scrapes)', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let collector: Collector | null = null;
  let pub: FakeVllmPublisher | null = null;
  let server: Server | null = null;

  beforeAll(async () => {
    redis = await startRedis();
    index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kcal', commandTimeoutMs: 300 });
  });
  afterEach(async () => {
    await collector?.stop();
    collector = null;
    await pub?.close();
    pub = null;
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = null;
  });
  afterAll(async () => {
    await index?.close();
    await redis?.stop();
  });

  it('writes the median prefill cost of a busy pod, then the solo cost once five prefills ran alone', async () => {
    let solo = false;
    const c = { prefillN: 0, prefillS: 0, computedN: 0, computedSum: 0 };
    const port = await freePort();
    server = createServer((_req, res) => {
      // Each scrape sees one more finished prefill of 1,000 computed tokens.
      c.prefillN += 1;
      c.prefillS += solo ? 0.3 : 0.4;
      c.computedN += 1;
      c.computedSum += 1000;
      const body = vllmExposition({ '0': { running: solo ? 1 : 3, waiting: 0, ...c } });
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(body);
    });
    await new Promise<void>((r) => server!.listen(port, '127.0.0.1', () => r()));
    pub = await new FakeVllmPublisher({ format: 'array' }).bind();
    collector = startCollector(index, [
      {
        id: 'pod-c',
        model: MODEL,
        address: '127.0.0.1:18021',
        kv_events: pub.endpoint,
        kv_events_replay: pub.replayEndpoint,
        metrics: `http://127.0.0.1:${port}/metrics`,
      },
    ]);
    await collector.start();
    const prefill = async (): Promise<number | undefined> =>
      (await index.listPods(MODEL)).find((p) => p.podId === 'pod-c')?.calibration?.prefillMsPerToken;

    await waitFor('busy calibration', async () => (await prefill()) !== undefined);
    expect(await prefill()).toBeCloseTo(0.4, 9);
    expect(await collector.metrics.registry.metrics()).toMatch(
      /kinference_collector_calibration\{pod="pod-c",rank="",coefficient="prefill_ms_per_token",source="median"\} 0\.4\d*/,
    );

    solo = true;
    await waitFor('solo calibration', async () => Math.abs(((await prefill()) ?? 0) - 0.3) < 1e-9);
    // The first solo interval starts at a busy scrape, so the switch needs 5 solo intervals after it.
    expect(c.prefillN).toBeGreaterThanOrEqual(20 + 6);
    expect(await collector.metrics.registry.metrics()).toMatch(
      /kinference_collector_calibration\{pod="pod-c",rank="",coefficient="prefill_ms_per_token",source="solo"\} 0\.3\d*/,
    );
  });
});
