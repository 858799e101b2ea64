import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import type { BlockKey } from '../../../src/core/types.js';
import { KeyMapper, newMapperCounters } from '../../../src/collector/key-mapper.js';
import { parseVllmBatch } from '../../../src/collector/wire/vllm-events.js';
import { MemoryKvIndex } from '../../../src/index/index.js';
import type { PodRef } from '../../../src/index/kv-index.js';
import { encodeBatch, type EventSpec } from '../../helpers/collector/vllm-frames.js';

const MODEL = 'm';
const BS = 4;
const POD: PodRef = { model: MODEL, podId: 'p' };

type Cmd =
  | { k: 'new'; blocks: number }
  | { k: 'extend'; chain: number; blocks: number }
  | { k: 'dup'; chain: number }
  | { k: 'remove'; chain: number }
  | { k: 'clear' };

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ k: fc.constant('new' as const), blocks: fc.integer({ min: 1, max: 4 }) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      k: fc.constant('extend' as const),
      chain: fc.nat(),
      blocks: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('dup' as const), chain: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('remove' as const), chain: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ k: 'clear' as const }) },
);

interface Block {
  hash: bigint;
  key: BlockKey;
}

/**
 * Differential check of the whole write path: a simulated vLLM emits KV events (stores, duplicate stores,
 * evictions, clears) → msgspec bytes in either encoding → parseVllmBatch → KeyMapper → index A. Index B is
 * written directly from the simulation's ground truth, with keys computed from each chain's full token
 * list. Every chain's lookup must agree.
 */
describe('collector write path vs ground truth', () => {
  it('property: decoded, keyed events leave the same index as the truth', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(cmd, { minLength: 1, maxLength: 40 }),
        fc.constantFrom('array' as const, 'map' as const),
        async (cmds, format) => {
          const a = new MemoryKvIndex();
          const b = new MemoryKvIndex();
          for (const ix of [a, b]) await ix.upsertPodState(POD, { address: 'x:1' });
          const mapper = new KeyMapper(MODEL, BS, 100_000);
          const counters = newMapperCounters();
          const chains: { tokens: number[]; blocks: Block[] }[] = [];
          const held = new Map<bigint, number>();
          let nextHash = 2n ** 62n;
          let nextToken = 1;

          const emit = async (events: EventSpec[]): Promise<void> => {
            const r = parseVllmBatch(encodeBatch(events, { format }));
            if (!r.ok) throw new Error(r.detail);
            await a.apply(POD, mapper.toOps(r.batch.events, counters));
          };
          const storeNew = async (chain: { tokens: number[]; blocks: Block[] }, n: number): Promise<void> => {
            const start = chain.blocks.length;
            const tokens = Array.from({ length: n * BS }, () => nextToken++);
            chain.tokens.push(...tokens);
            const keys = blockKeys(chain.tokens, BS, keySeed({ model: MODEL }));
            const fresh = keys.slice(start).map((key) => ({ hash: nextHash++, key }));
            const parent = chain.blocks[start - 1]?.hash ?? null;
            chain.blocks.push(...fresh);
            for (const x of fresh) held.set(x.hash, (held.get(x.hash) ?? 0) + 1);
            await emit([
              { type: 'BlockStored', hashes: fresh.map((x) => x.hash), parent, tokens, blockSize: BS },
            ]);
            await b.apply(POD, [{ op: 'store', tier: 'GPU', keys: fresh.map((x) => x.key) }]);
          };

          for (const c of cmds) {
            const chain = chains.length > 0 && 'chain' in c ? chains[c.chain % chains.length]! : null;
            const last = chain?.blocks[chain.blocks.length - 1];
            if (c.k === 'new') {
              const ch = { tokens: [], blocks: [] };
              chains.push(ch);
              await storeNew(ch, c.blocks);
            } else if (c.k === 'extend' && chain && last && (held.get(last.hash) ?? 0) > 0) {
              // vLLM extends a sequence only from a block it still holds.
              await storeNew(chain, c.blocks);
            } else if (c.k === 'dup' && chain && last && (held.get(last.hash) ?? 0) > 0) {
              const i = chain.blocks.length - 1;
              held.set(last.hash, held.get(last.hash)! + 1);
              const parent = chain.blocks[i - 1]?.hash ?? null;
              await emit([
                {
                  type: 'BlockStored',
                  hashes: [last.hash],
                  parent,
                  tokens: chain.tokens.slice(i * BS, (i + 1) * BS),
                  blockSize: BS,
                },
              ]);
              await b.apply(POD, [{ op: 'store', tier: 'GPU', keys: [last.key] }]);
            } else if (c.k === 'remove' && chain) {
              // vLLM frees a request's blocks tail first, so a block is evicted only after its descendants.
              const blk = [...chain.blocks].reverse().find((x) => (held.get(x.hash) ?? 0) > 0);
              if (!blk) continue;
              held.set(blk.hash, held.get(blk.hash)! - 1);
              await emit([{ type: 'BlockRemoved', hashes: [blk.hash] }]);
              await b.apply(POD, [{ op: 'remove', tier: 'GPU', keys: [blk.key] }]);
            } else if (c.k === 'clear') {
              held.clear();
              await emit([{ type: 'AllBlocksCleared' }]);
              await b.apply(POD, [{ op: 'clear' }]);
            }
          }
          for (const ch of chains) {
            const keys = ch.blocks.map((x) => x.key);
            const [ra, rb] = [await a.lookup(MODEL, keys), await b.lookup(MODEL, keys)];
            expect(ra.pods[0]!.prefixBlocks).toEqual(rb.pods[0]!.prefixBlocks);
          }
          expect(counters.skipped.unknown_parent).toBe(0);
        },
      ),
      { numRuns: 150 },
    );
  });
});
