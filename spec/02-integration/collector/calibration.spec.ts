import { createServer, type Server } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Collector } from '../../../src/collector/collector.js';
import { createKvIndex, type KvIndex } from '../../../src/index/index.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import type { PodConfig } from '../../../src/config/fleet-config.js';
import { MODEL, startCollector } from '../../helpers/collector/collector-harness.js';
import { vllmExposition } from '../../helpers/collector/vllm-metrics-text.js';

// The collector's calibration end to end: a pod's /metrics finishes one prefill per scrape, first on a busy
// pod (3 running) at 0.4 ms/token, then alone at 0.3 ms/token. The estimate goes to the index (what the
// router reads) and to the collector's own /metrics, with what set it.
describe('collector calibration from /metrics (real Redis, HTTP scrapes)', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let collector: Collector | null = null;
  let pubs: FakeVllmPublisher[] = [];
  let servers: Server[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kcal', commandTimeoutMs: 300 });
  });
  afterEach(async () => {
    await collector?.stop();
    collector = null;
    for (const p of pubs) await p.close();
    pubs = [];
    for (const s of servers) await new Promise<void>((r) => s.close(() => r()));
    servers = [];
  });

  /** A pod whose /metrics answers each scrape with `exposition()`. */
  const servingPod = async (id: string, exposition: () => string): Promise<PodConfig> => {
    const port = await freePort();
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(exposition());
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
    const pub = await new FakeVllmPublisher({ format: 'array' }).bind();
    pubs.push(pub);
    return {
      id,
      model: MODEL,
      address: `127.0.0.1:${18020 + pubs.length}`,
      kv_events: pub.endpoint,
      kv_events_replay: pub.replayEndpoint,
      metrics: `http://127.0.0.1:${port}/metrics`,
    };
  };
  /** A pod whose /metrics finishes one prefill of 1,000 computed tokens per scrape, taking `ms()`. */
  const pod = (id: string, ms: () => number, running: () => number): Promise<PodConfig> => {
    const c = { prefillN: 0, prefillS: 0, computedN: 0, computedSum: 0 };
    return servingPod(id, () => {
      c.prefillN += 1;
      c.prefillS += ms() / 1000;
      c.computedN += 1;
      c.computedSum += 1000;
      return vllmExposition(
        { '0': { running: running(), waiting: 0, ...c } },
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="1234"} 1.0\n',
      );
    });
  };
  /** The value of one series in the collector's /metrics text. */
  const series = async (name: string, labels: string): Promise<number> => {
    const text = await collector!.metrics.registry.metrics();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
    if (!line) throw new Error(`no ${name}{${labels}} in the collector's /metrics`);
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  };
  const prefillOf = async (id: string): Promise<number | undefined> =>
    (await index.listPods(MODEL)).find((p) => p.podId === id)?.calibration?.prefillMsPerToken;
  afterAll(async () => {
    await index?.close();
    await redis?.stop();
  });

  it('writes the median prefill cost of a busy pod, then the solo cost once five prefills ran alone', async () => {
    let solo = false;
    let scrapes = 0;
    const c = await pod(
      'pod-c',
      () => (scrapes++, solo ? 300 : 400),
      () => (solo ? 1 : 3),
    );
    collector = startCollector(index, [c]);
    await collector.start();
    const prefill = (): Promise<number | undefined> => prefillOf('pod-c');

    await waitFor('busy calibration', async () => (await prefill()) !== undefined);
    expect(await prefill()).toBeCloseTo(0.4, 9);
    expect(
      await series(
        'kinference_collector_calibration',
        'pod="pod-c",rank="",coefficient="prefill_ms_per_token",source="median"',
      ),
    ).toBeCloseTo(0.4, 9);

    solo = true;
    await waitFor('solo calibration', async () => Math.abs(((await prefill()) ?? 0) - 0.3) < 1e-9);
    // The first solo interval starts at a busy scrape, so the switch needs 5 solo intervals after it.
    expect(scrapes).toBeGreaterThanOrEqual(20 + 6);
    expect(
      await series(
        'kinference_collector_calibration',
        'pod="pod-c",rank="",coefficient="prefill_ms_per_token",source="solo"',
      ),
    ).toBeCloseTo(0.3, 9);
  });

  it('writes like pods the median of their own estimates (calibration_pool), or each its own when off', async () => {
    const pods = [
      await pod(
        'pod-a',
        () => 400,
        () => 3,
      ),
      await pod(
        'pod-b',
        () => 300,
        () => 3,
      ),
      await pod(
        'pod-s',
        () => 700,
        () => 3,
      ), // busy, then avoided: stale and slow-looking
    ];
    collector = startCollector(index, pods);
    await collector.start();
    const all = async () => Promise.all(['pod-a', 'pod-b', 'pod-s'].map(prefillOf));
    await waitFor('pooled calibration', async () =>
      (await all()).every((p) => p !== undefined && Math.abs(p - 0.4) < 1e-9),
    );
    const labels = 'pod="pod-s",rank="",coefficient="prefill_ms_per_token"';
    expect(await series('kinference_collector_calibration', `${labels},source="median"`)).toBeCloseTo(0.7, 9);
    expect(await series('kinference_collector_calibration_written', labels)).toBeCloseTo(0.4, 9);
    await collector.stop();

    collector = startCollector(index, pods, { calibration_pool: false });
    await collector.start();
    await waitFor('own calibration', async () => {
      const [a, b, s] = await all();
      return Math.abs(a! - 0.4) < 1e-9 && Math.abs(b! - 0.3) < 1e-9 && Math.abs(s! - 0.7) < 1e-9;
    });
  });
  it("writes each pod's decode step, fitted over its decode-only scrape intervals, and exposes the line", async () => {
    // Every 4th scrape a request came and a prefill ended (the batch changed); the 3 between decode only,
    // 20 steps of r = 1…6 requests of 4,000 + 100 tokens at 43 ms + 0.36 ms per 1k context tokens.
    const P = 4000;
    const G = 200;
    const c = { running: 0, kv: 0, queries: 0, prompt: 0, prefillN: 0, prefillS: 0, computedN: 0 };
    const d = { computedSum: 0, iterN: 0, iterSum: 0, itlN: 0, itlS: 0 };
    const f = { finishedN: 0, finishedPrompt: 0, finishedGeneration: 0 };
    let k = 0;
    const podD = await servingPod('pod-d', () => {
      const r = 1 + (Math.floor(k / 4) % 6);
      if (k++ % 4 === 0) {
        Object.assign(c, { running: r, queries: c.queries + P, prompt: c.prompt + P });
        Object.assign(c, { prefillN: c.prefillN + 1, prefillS: c.prefillS + 1, computedN: c.computedN + 1 });
        d.computedSum += P;
        Object.assign(f, {
          finishedN: f.finishedN + 1,
          finishedPrompt: f.finishedPrompt + P,
          finishedGeneration: f.finishedGeneration + G,
        });
      } else {
        const stepS = (43 + 0.00036 * r * (P + G / 2)) / 1000;
        Object.assign(d, { iterN: d.iterN + 20, iterSum: d.iterSum + 20 * r });
        Object.assign(d, { itlN: d.itlN + 20 * r, itlS: d.itlS + 20 * r * stepS });
      }
      c.kv = (r * (P + G / 2)) / 1_000_000;
      return vllmExposition(
        { '0': { ...c, ...d, ...f } },
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="62500"} 1.0\n',
      );
    });
    collector = startCollector(index, [podD]);
    await collector.start();
    const steps = async () => (await index.listPods(MODEL)).find((p) => p.podId === 'pod-d')?.decodeSteps;
    await waitFor('decode steps', async () => (await steps())?.line != null);
    const line = (await steps())!.line!;
    expect(line.baseMs).toBeCloseTo(43, 6);
    expect(line.msPerContextToken).toBeCloseTo(0.00036, 9);
    const at = 'pod="pod-d",rank="",coefficient=';
    expect(await series('kinference_collector_calibration', `${at}"decode_base_ms",source=""`)).toBeCloseTo(
      43,
      6,
    );
    expect(
      await series('kinference_collector_calibration', `${at}"decode_ms_per_1k_context",source=""`),
    ).toBeCloseTo(0.36, 6);
  });
});
