import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Collector } from '../../../src/collector/collector.js';
import type { PodConfig } from '../../../src/config/fleet-config.js';
import { type KvIndex } from '../../../src/index/index.js';
import { freePort } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import {
  BS,
  MODEL,
  cachedBlocks,
  freshTokens,
  startCollector,
  waitCached,
  waitSubscribed,
} from '../../helpers/collector/collector-harness.js';
import { observerIndex } from '../../helpers/observer-index.js';

/** Two consecutive free ports (vLLM's rank r publishes on port + r). */
async function portPair(): Promise<number> {
  for (;;) {
    const p = await freePort();
    const nextFree = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(p + 1, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (nextFree) return p;
  }
}

describe('data-parallel pods: one stream and one index entry per rank', () => {
  let redis: TestRedis;
  let index: KvIndex;
  let ranks: FakeVllmPublisher[];
  let collector: Collector;
  let pods: PodConfig[];

  beforeAll(async () => {
    redis = await startRedis();
    index = observerIndex({ kind: 'redis', url: redis.url, keyPrefix: 'kdp' });
    const [kv, rep] = [await portPair(), await portPair()];
    ranks = await Promise.all(
      [0, 1].map((r) =>
        new FakeVllmPublisher({ format: 'map', dpRank: r }).bindAt(
          `tcp://127.0.0.1:${kv + r}`,
          `tcp://127.0.0.1:${rep + r}`,
        ),
      ),
    );
    pods = [
      {
        id: 'pod-dp',
        model: MODEL,
        address: '127.0.0.1:18050',
        kv_events: `tcp://127.0.0.1:${kv}`,
        kv_events_replay: `tcp://127.0.0.1:${rep}`,
        data_parallel_size: 2,
      },
    ];
    collector = startCollector(index, pods);
    await collector.start();
    await waitSubscribed(ranks[0]!, () => collector.worker('pod-dp@dp0'));
    await waitSubscribed(ranks[1]!, () => collector.worker('pod-dp@dp1'));
  });

  afterAll(async () => {
    await collector?.stop();
    for (const r of ranks ?? []) await r.close();
    await index?.close();
    await redis?.stop();
  });

  /**
   * A 2-block chain on rank 0 and a 3-block one on rank 1, both numbered from the same vLLM hash `h0` (other
   * tokens), indexed; returns their tokens.
   */
  async function chainsOnRanks(h0: bigint): Promise<[number[], number[]]> {
    const t = [freshTokens(2), freshTokens(3)] as const;
    for (const r of [0, 1] as const) {
      const hashes = t[r].map((_, i) => h0 + BigInt(i)).slice(0, t[r].length / BS);
      await ranks[r]!.publish([{ type: 'BlockStored', hashes, parent: null, tokens: t[r], blockSize: BS }]);
    }
    await waitCached(index, 'pod-dp@dp0', t[0], 2);
    await waitCached(index, 'pod-dp@dp1', t[1], 3);
    return [t[0], t[1]];
  }

  it('indexes each rank as <id>@dp<r> at the pod address, from port + rank', async () => {
    const [t0] = await chainsOnRanks(1n);
    expect(await cachedBlocks(index, 'pod-dp@dp1', t0)).toBe(0);
    expect((await index.listPods(MODEL)).map((p) => [p.podId, p.address])).toEqual([
      ['pod-dp@dp0', '127.0.0.1:18050'],
      ['pod-dp@dp1', '127.0.0.1:18050'],
    ]);
    expect(collector.worker('pod-dp@dp1')!.stats.dpRankMismatches).toBe(0);
  });

  it("a restarted collector goes on from each rank's own handoff (the ranks reuse the same vLLM hashes)", async () => {
    const [t0, t1] = await chainsOnRanks(11n);
    expect(await collector.stop()).toBe(true);
    // Meanwhile each rank extends its chain from a parent hash both ranks use, for other tokens: only the
    // rank's own map gives the right key.
    const [x0, x1] = [freshTokens(1), freshTokens(1)];
    await ranks[0]!.publish([{ type: 'BlockStored', hashes: [14n], parent: 12n, tokens: x0, blockSize: BS }]);
    await ranks[1]!.publish([{ type: 'BlockStored', hashes: [14n], parent: 13n, tokens: x1, blockSize: BS }]);
    collector = startCollector(index, pods);
    await collector.start();
    await waitCached(index, 'pod-dp@dp0', [...t0, ...x0], 3);
    await waitCached(index, 'pod-dp@dp1', [...t1, ...x1], 4);
    for (const id of ['pod-dp@dp0', 'pod-dp@dp1']) {
      const w = collector.worker(id)!;
      expect([w.stats.handoffTakes.resumed, w.stats.podClears.start]).toEqual([1, 0]);
    }
  });
});
