import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import type { BlockKey, Tier } from '../../../src/core/types.js';
import { HANDOFF_VERSION, decodeHandoff, encodeHandoff } from '../../../src/collector/handoff.js';
import { KeyMapper, newMapperCounters, type MapperCounters } from '../../../src/collector/key-mapper.js';
import { parseVllmBatch } from '../../../src/collector/wire/vllm-events.js';
import { MemoryKvIndex, type IndexOp, type PodRef } from '../../../src/index/index.js';
import { encodeBatch, type EventSpec, type StoredSpec } from '../../helpers/collector/vllm-frames.js';

const MODEL = 'm';
const BS = 4;
const POD: PodRef = { model: MODEL, podId: 'p' };

type OffloadTier = Exclude<Tier, 'GPU'>;

type Cmd =
  | { k: 'new'; blocks: number; salt: boolean }
  | { k: 'extend'; chain: number; blocks: number }
  | { k: 'dup'; chain: number }
  | { k: 'reannounce'; chain: number }
  | { k: 'offload'; chain: number; at: number; tier: OffloadTier }
  | { k: 'unoffload'; chain: number }
  | { k: 'remove'; chain: number }
  | { k: 'clear' };

const chainCmd = <K extends Cmd['k']>(k: K) => fc.record({ k: fc.constant(k), chain: fc.nat() });

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      k: fc.constant('new' as const),
      blocks: fc.integer({ min: 1, max: 4 }),
      salt: fc.boolean(),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      k: fc.constant('extend' as const),
      chain: fc.nat(),
      blocks: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: chainCmd('dup') },
  { weight: 2, arbitrary: chainCmd('reannounce') },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('offload' as const),
      chain: fc.nat(),
      at: fc.nat(),
      tier: fc.constantFrom<OffloadTier>('CPU', 'STORAGE'),
    }),
  },
  { weight: 1, arbitrary: chainCmd('unoffload') },
  { weight: 3, arbitrary: chainCmd('remove') },
  { weight: 1, arbitrary: fc.constant({ k: 'clear' as const }) },
);

/** The next collector's mapper: what `m` knew, through a handoff record and back (src/collector/handoff.ts). */
function handedOver(m: KeyMapper, counters: MapperCounters): KeyMapper {
  const record = encodeHandoff({
    v: HANDOFF_VERSION,
    model: MODEL,
    podId: POD.podId,
    endpoint: 'tcp://pod:5557',
    topic: '',
    blockSize: BS,
    lastSeq: 7,
    lastTsSec: null,
    window: [],
    bufferKeeps: true,
    partialSinceMs: 0,
    processStartSec: null,
    mapper: m.snapshot(),
    savedAtMs: 0,
  });
  const d = decodeHandoff(record);
  if (!d.ok) throw new Error(d.detail);
  const next = new KeyMapper(MODEL, BS, 100_000);
  expect(next.restore(d.handoff.mapper, counters)).toEqual([]);
  expect(next.snapshot()).toEqual(m.snapshot());
  return next;
}

interface Block {
  hash: bigint;
  key: BlockKey;
}

interface Chain {
  tokens: number[];
  blocks: Block[];
  salt: string | null;
  /** False when the collector must not index the chain (its salt cannot be told from a multimodal id). */
  indexed: boolean;
}

/**
 * Differential check of the whole write path: a simulated vLLM emits KV events → msgspec bytes in either
 * encoding → parseVllmBatch → KeyMapper → index A. Index B is written directly from the simulation's ground
 * truth, with keys computed from each chain's full token list. Every chain's lookup must agree.
 *
 * The simulation emits what vLLM emits:
 * - stores of new runs, chained to their parent (salted chains carry the cache_salt on block 0);
 * - a second physical block under a held hash, stored after its parent (an exact repeat recomputes the
 *   last prompt block);
 * - re-announcements of a chain's held prefix from block 0 (kv_cache_report_mode=full), which change nothing;
 * - offloaded copies as the released OffloadingConnector announces them (parent None, no tokens, medium
 *   CPU/STORAGE), and their evictions;
 * - tail-first evictions and AllBlocksCleared.
 * The vLLM version is drawn per run: a current one (group_idx on every event, so a chain start's plain string
 * is its cache_salt) or one from before #36708, where a salted chain is indistinguishable from an image in
 * block 0 and is never indexed.
 */
describe('collector write path vs ground truth', () => {
  it('property: decoded, keyed events leave the same index as the truth, across collector handoffs', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(cmd, { minLength: 1, maxLength: 40 }),
        fc.constantFrom('array' as const, 'map' as const),
        fc.boolean(),
        fc.array(fc.nat({ max: 39 }), { maxLength: 3 }),
        async (cmds, format, current, handoffs) => {
          const a = new MemoryKvIndex();
          const b = new MemoryKvIndex();
          for (const ix of [a, b]) await ix.upsertPodState(POD, { address: 'x:1' });
          let mapper = new KeyMapper(MODEL, BS, 100_000);
          const counters = newMapperCounters();
          /** The mapper before the last handoff, kept running: the next one must write exactly what it writes. */
          let twin: KeyMapper | null = null;
          const chains: Chain[] = [];
          /** GPU: physical blocks per hash. */
          const held = new Map<bigint, number>();
          /** Offloaded copies per hash and tier. */
          const copies = new Map<bigint, Map<OffloadTier, number>>();
          let expectUnmapped = 0;
          let nextHash = 2n ** 62n;
          let nextToken = 1;
          const groupIdx = current ? 0 : null;

          const emit = async (events: EventSpec[]): Promise<void> => {
            const r = parseVllmBatch(encodeBatch(events, { format, storedFields: 11, removedFields: 3 }));
            if (!r.ok) throw new Error(r.detail);
            const ops = mapper.toOps(r.batch.events, counters);
            if (twin) expect(ops).toEqual(twin.toOps(r.batch.events, newMapperCounters()));
            await a.apply(POD, ops);
          };
          const truth = async (chain: Chain, ops: IndexOp[]): Promise<void> => {
            if (chain.indexed) await b.apply(POD, ops);
          };
          const gpuStored = (chain: Chain, from: number, to: number, parent: bigint | null): StoredSpec => ({
            type: 'BlockStored',
            hashes: chain.blocks.slice(from, to).map((x) => x.hash),
            parent,
            tokens: chain.tokens.slice(from * BS, to * BS),
            blockSize: BS,
            groupIdx,
            extraKeys:
              from === 0 && chain.salt !== null
                ? chain.blocks.slice(from, to).map((_, i) => (i === 0 ? [chain.salt!] : null))
                : null,
          });
          const storeNew = async (chain: Chain, n: number): Promise<void> => {
            const start = chain.blocks.length;
            chain.tokens.push(...Array.from({ length: n * BS }, () => nextToken++));
            const keys = blockKeys(chain.tokens, BS, keySeed({ model: MODEL, cacheSalt: chain.salt }));
            const fresh = keys.slice(start).map((key) => ({ hash: nextHash++, key }));
            const parent = chain.blocks[start - 1]?.hash ?? null;
            chain.blocks.push(...fresh);
            for (const x of fresh) held.set(x.hash, (held.get(x.hash) ?? 0) + 1);
            await emit([gpuStored(chain, start, chain.blocks.length, parent)]);
            await truth(chain, [{ op: 'store', tier: 'GPU', keys: fresh.map((x) => x.key) }]);
          };
          const isHeld = (x: Block | undefined): x is Block => x !== undefined && (held.get(x.hash) ?? 0) > 0;

          for (const [i, c] of cmds.entries()) {
            // A collector stopped here and the next one went on from its handoff.
            if (handoffs.includes(i)) [twin, mapper] = [mapper, handedOver(mapper, counters)];
            const chain = chains.length > 0 && 'chain' in c ? chains[c.chain % chains.length]! : null;
            const last = chain?.blocks[chain.blocks.length - 1];
            if (c.k === 'new') {
              const salt = c.salt ? `tenant-${chains.length}` : null;
              const ch: Chain = { tokens: [], blocks: [], salt, indexed: salt === null || current };
              chains.push(ch);
              await storeNew(ch, c.blocks);
            } else if (c.k === 'extend' && chain && isHeld(last)) {
              // vLLM extends a sequence only from a block it still holds.
              await storeNew(chain, c.blocks);
            } else if (c.k === 'dup' && chain?.indexed && chain.blocks.length > 1 && isHeld(last)) {
              // (Not on an unindexed chain: the mapper keeps no copy counts for hashes it cannot key.)
              const i = chain.blocks.length - 1;
              held.set(last.hash, held.get(last.hash)! + 1);
              await emit([gpuStored(chain, i, i + 1, chain.blocks[i - 1]!.hash)]);
              await truth(chain, [{ op: 'store', tier: 'GPU', keys: [last.key] }]);
            } else if (c.k === 'reannounce' && chain) {
              // A request hit the chain's held prefix: vLLM announces it again, from block 0, and keeps it as is.
              let n = 0;
              while (isHeld(chain.blocks[n])) n++;
              if (n > 0) await emit([gpuStored(chain, 0, n, null)]);
            } else if (c.k === 'offload' && chain) {
              // The connector copies a block the GPU holds.
              const blk = chain.blocks[c.at % chain.blocks.length];
              if (!isHeld(blk)) continue;
              const byTier = copies.get(blk.hash) ?? new Map<OffloadTier, number>();
              copies.set(blk.hash, byTier.set(c.tier, (byTier.get(c.tier) ?? 0) + 1));
              if (!chain.indexed) expectUnmapped++;
              await emit([
                {
                  type: 'BlockStored',
                  hashes: [blk.hash],
                  parent: null,
                  tokens: [],
                  blockSize: BS,
                  medium: c.tier,
                },
              ]);
              await truth(chain, [{ op: 'store', tier: c.tier, keys: [blk.key] }]);
            } else if (c.k === 'unoffload' && chain) {
              for (const blk of chain.blocks) {
                const byTier = copies.get(blk.hash);
                const tier = [...(byTier?.entries() ?? [])].find(([, n]) => n > 0)?.[0];
                if (tier === undefined) continue;
                byTier!.set(tier, byTier!.get(tier)! - 1);
                await emit([{ type: 'BlockRemoved', hashes: [blk.hash], medium: tier }]);
                await truth(chain, [{ op: 'remove', tier, keys: [blk.key] }]);
                break;
              }
            } else if (c.k === 'remove' && chain) {
              // vLLM frees a request's blocks tail first, so a block is evicted only after its descendants.
              const blk = [...chain.blocks].reverse().find(isHeld);
              if (!blk) continue;
              held.set(blk.hash, held.get(blk.hash)! - 1);
              await emit([{ type: 'BlockRemoved', hashes: [blk.hash] }]);
              await truth(chain, [{ op: 'remove', tier: 'GPU', keys: [blk.key] }]);
            } else if (c.k === 'clear') {
              held.clear();
              copies.clear();
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
          expect(counters.skipped.offload_unmapped).toBe(expectUnmapped);
        },
      ),
      { numRuns: 200 },
    );
  });
});
