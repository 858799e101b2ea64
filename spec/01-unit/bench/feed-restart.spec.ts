import { describe, expect, it } from 'vitest';
import { CollectorFeed } from '../../../bench/lib/des/feed.js';
import { SimPod } from '../../../bench/lib/des/pod.js';
import { engineProfile } from '../../../bench/lib/setup.js';
import type { EngineBlockHash, KvCacheEvent } from '../../../emulator/engine/types.js';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import { MemoryKvIndex } from '../../../src/index/index.js';

// The discrete-event collector restart (bench/debug/sweep.ts --collector-restart): every pod is cleared and
// rebuilt from its last `replayBatches` batches, and marked partial unless those reach back to its first.
describe('discrete-event collector feed: a restart rebuilds from the replay buffer', () => {
  const BS = 16;
  const tokens = (base: number): number[] => Array.from({ length: 2 * BS }, (_, i) => base + i);
  let nextHash = 1n;
  // Engine hashes are 64 hex digits (a sha256 digest).
  const hash = (): EngineBlockHash => (nextHash++).toString(16).padStart(64, '0') as EngineBlockHash;
  const stored = (ids: number[]): KvCacheEvent[] => {
    const h = [hash(), hash()];
    return [
      {
        type: 'BlockStored',
        blockHashes: h,
        parentBlockHash: null,
        loraId: null,
        loraName: null,
        extraKeys: [null, null],
        tokenIds: ids,
        blockSize: BS,
      },
    ];
  };
  const held = async (index: MemoryKvIndex, ids: number[]): Promise<number> =>
    (await index.lookup('m', blockKeys(ids, BS, keySeed({ model: 'm', lora: null, cacheSalt: null }))))
      .pods[0]!.prefixBlocks.GPU;

  const run = async (replayBatches: number) => {
    const index = new MemoryKvIndex();
    const feed = new CollectorFeed(index, 'm', BS, false, replayBatches);
    const pod = new SimPod(
      'pod-0',
      '10.0.0.1:8000',
      {
        profile: engineProfile('l40s-27b-fp8'),
        kvCapacityTokens: 94_208,
        blockSize: BS,
        eosTokenId: 2,
        outputVocab: [7],
      },
      1,
    );
    await feed.register(pod, 0);
    const [a, b] = [tokens(1000), tokens(5000)];
    await feed.applyKvBatch('pod-0', stored(a), 10);
    await feed.applyKvBatch('pod-0', [], 20); // a step without events publishes no batch
    await feed.applyKvBatch('pod-0', stored(b), 30);
    expect([await held(index, a), await held(index, b)]).toEqual([2, 2]);
    await feed.restart(1000);
    const state = (await index.listPods('m'))[0]!;
    return { a: await held(index, a), b: await held(index, b), partialSinceMs: state.partialSinceMs };
  };

  it('a buffer holding every batch rebuilds it all: not partial', async () => {
    expect(await run(2)).toEqual({ a: 2, b: 2, partialSinceMs: 0 });
  });

  it('a buffer past the first batch loses its blocks and marks the pod partial from the restart', async () => {
    expect(await run(1)).toEqual({ a: 0, b: 2, partialSinceMs: 1000 });
  });
});
