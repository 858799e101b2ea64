import { describe, expect, it } from 'vitest';
import { noneHashFromSeed } from '../../../emulator/engine/block-hash.js';
import type { Engine } from '../../../emulator/engine/engine.js';
import { isCachedBlockReannouncement, KvCacheManager } from '../../../emulator/engine/kv-cache-manager.js';
import { EngineRequest } from '../../../emulator/engine/request.js';
import { Rng } from '../../../emulator/engine/rng.js';
import type {
  BlockStoredEvent,
  EngineOutcome,
  EngineRequestInput,
  KvCacheEvent,
  StepOutcome,
} from '../../../emulator/engine/types.js';
import { blockHashesOf, drain, prompt, toyEngine } from './engine-harness.js';

// vLLM PR #45261: with vllm_xargs.kv_cache_report_mode "full", KVCacheManager.get_computed_blocks re-announces
// a prefix hit as one BlockStored (BlockPool.emit_cached_block_events), without touching the pool.

const BS = 4;
const events = (os: EngineOutcome[]): KvCacheEvent[] => os.flatMap((o) => o.kvEvents);
const stored = (os: EngineOutcome[]): BlockStoredEvent[] =>
  events(os).filter((e): e is BlockStoredEvent => e.type === 'BlockStored');
const steps = (os: EngineOutcome[]): StepOutcome[] => os.filter((o): o is StepOutcome => o.kind === 'step');
const reannouncements = (es: KvCacheEvent[]): BlockStoredEvent[] =>
  es.filter((e): e is BlockStoredEvent => e.type === 'BlockStored' && isCachedBlockReannouncement(e));

const LORA = { loraName: 'lora-a', loraId: 7, cacheSalt: 'salt-1' } as const;
const SHARED = prompt(17, 1);

/** Caches SHARED (4 full blocks) under LoRA and salt, then runs `b`, which shares its first 4 blocks. */
function hitScenario(b: Partial<EngineRequestInput>): {
  engine: Engine;
  first: EngineOutcome[];
  second: EngineOutcome[];
} {
  const engine = toyEngine();
  engine.addRequest({ id: 'a', promptTokenIds: SHARED, maxTokens: 1, ...LORA }, 0);
  const first = drain(engine);
  engine.addRequest(
    {
      id: 'b',
      promptTokenIds: [...SHARED.slice(0, 16), 9, 9, 9],
      maxTokens: 3,
      ignoreEos: true,
      ...LORA,
      ...b,
    },
    engine.clockMs + 1,
  );
  return { engine, first, second: drain(engine) };
}

describe('kv_cache_report_mode "full" (vLLM #45261)', () => {
  it("re-announces a hit of N blocks as exactly one BlockStored from block 0 with the original stores' hashes, tokens and extra keys", () => {
    const base = hitScenario({});
    const full = hitScenario({ kvCacheReportMode: 'full' });
    const original = stored(full.first);
    const origHashes = original.flatMap((s) => s.blockHashes);
    expect(origHashes).toHaveLength(4);

    const re = events(full.second)[0];
    expect(re).toEqual({
      type: 'BlockStored',
      blockHashes: origHashes,
      parentBlockHash: null,
      tokenIds: SHARED.slice(0, 16),
      blockSize: BS,
      loraId: 7,
      loraName: 'lora-a',
      extraKeys: original.flatMap((s) => s.extraKeys),
    });
    // Same field order as an ordinary store, so it encodes the same way.
    expect(Object.keys(re as object)).toEqual(Object.keys(original[0] as object));
    expect(original.flatMap((s) => s.extraKeys)).toEqual([
      ['lora-a', 'salt-1'],
      ['lora-a'],
      ['lora-a'],
      ['lora-a'],
    ]);
    // Exactly one extra event, first (the lookup precedes the allocation); everything else is unchanged.
    expect(events(full.second).slice(1)).toEqual(events(base.second));
    expect(reannouncements(events(full.second))).toEqual([re]);
    expect(
      JSON.stringify(full.second.map((o, i) => (i === 0 ? { ...o, kvEvents: o.kvEvents.slice(1) } : o))),
    ).toBe(JSON.stringify(base.second));
    expect(full.engine.snapshot()).toEqual(base.engine.snapshot());
  });

  it('changes no block state: free queue order, cached hash counts and refcounts match the same lookup without the mode', () => {
    const noneHash = noneHashFromSeed('report-mode');
    const request = (input: EngineRequestInput): EngineRequest =>
      new EngineRequest(input, 0, new Rng(1), noneHash, BS);
    const poolState = (m: KvCacheManager) => ({
      free: m.pool.freeQueueIds(),
      cached: [...m.pool.cachedHashCounts()],
      refs: m.pool.blocks.map((b) => b.refCnt),
      pending: m.pool.pendingEventCount,
    });
    const lookup = (mode: string | undefined) => {
      const m = new KvCacheManager(16, BS, 1 << 20);
      // a holds SHARED's blocks 0–1; c hit them, cached block 2 and left, so block 2 is free but cached and
      // b's hit mixes blocks in use with one in the free queue.
      const a = request({ id: 'a', promptTokenIds: SHARED.slice(0, 9), maxTokens: 1 });
      m.allocateSlots(a, 9);
      const c = request({ id: 'c', promptTokenIds: SHARED.slice(0, 13), maxTokens: 1 });
      const cHit = m.getComputedBlocks(c);
      m.allocateSlots(c, 13 - cHit.numTokens, cHit);
      m.free(c);
      m.pool.takeEvents();
      const before = poolState(m);
      const b = request({
        id: 'b',
        promptTokenIds: SHARED,
        maxTokens: 1,
        ...(mode === undefined ? {} : { kvCacheReportMode: mode }),
      });
      const hit = m.getComputedBlocks(b);
      return {
        before,
        after: poolState(m),
        hit: hit.blocks.map((x) => x.id),
        events: m.pool.takeEvents(),
        m,
      };
    };
    const base = lookup(undefined);
    const full = lookup('full');
    expect(full.hit).toEqual(base.hit);
    expect(full.hit).toHaveLength(3);
    expect(full.before.free).toContain(full.hit[2]);
    expect(full.before.free).not.toContain(full.hit[0]);
    expect(base.events).toEqual([]);
    expect(full.events).toHaveLength(1);
    // Only the event list grew.
    expect({ ...full.after, pending: 0 }).toEqual({ ...full.before, pending: 0 });
    expect(full.after.pending).toBe(full.before.pending + 1);
    expect({ ...full.after, pending: 0 }).toEqual({ ...base.after, pending: 0 });
    expect(full.m.referenceCounts()).toEqual(base.m.referenceCounts());
  });

  it('emits nothing extra when the lookup finds no hit', () => {
    const run = (mode?: string) => {
      const e = toyEngine();
      e.addRequest(
        {
          id: 'x',
          promptTokenIds: prompt(18, 3),
          maxTokens: 2,
          ...(mode ? { kvCacheReportMode: mode } : {}),
        },
        0,
      );
      return drain(e);
    };
    const full = run('full');
    expect(stored(full).length).toBeGreaterThan(0);
    expect(JSON.stringify(full)).toBe(JSON.stringify(run()));
    expect(reannouncements(events(full))).toEqual([]);
  });

  it('emits nothing for "incremental", an absent mode or any other string', () => {
    const base = hitScenario({});
    expect(reannouncements(events(base.second))).toEqual([]);
    for (const mode of ['incremental', 'FULL', 'full ', 'Full', '', '["full"]']) {
      const r = hitScenario({ kvCacheReportMode: mode });
      expect(JSON.stringify(r.second), mode).toBe(JSON.stringify(base.second));
    }
    // The hit is real, so "full" would have re-announced it.
    expect(steps(base.second)[0]?.admitted[0]?.cachedTokens).toBe(16);
  });

  it('emits nothing for prompt_logprobs requests, which skip reading the prefix cache', () => {
    const base = hitScenario({ skipPrefixCache: true });
    const full = hitScenario({ skipPrefixCache: true, kvCacheReportMode: 'full' });
    expect(steps(full.second)[0]?.admitted[0]?.cachedTokens).toBe(0);
    expect(reannouncements(events(full.second))).toEqual([]);
    expect(JSON.stringify(full.second)).toBe(JSON.stringify(base.second));
  });

  it('re-announces on every lookup while the head of the queue waits for blocks, and at admission', () => {
    // 10 usable blocks. `seed` caches P (2 blocks); `a` holds 6–8 blocks for 9 steps; b (P + 12 tokens) needs
    // 3 new blocks plus its 2 free cached hits, so every lookup while a runs fails to allocate.
    const P = prompt(8, 60);
    const run = (mode?: string) => {
      const e = toyEngine({ kvCapacityTokens: 44, maxNumBatchedTokens: 16 });
      e.addRequest({ id: 'seed', promptTokenIds: P, maxTokens: 1 }, 0);
      drain(e);
      const t = e.clockMs + 1;
      e.addRequest({ id: 'a', promptTokenIds: prompt(24, 61), maxTokens: 8, ignoreEos: true }, t);
      e.advanceTo(t);
      e.addRequest(
        {
          id: 'b',
          promptTokenIds: [...P, ...prompt(12, 62)],
          maxTokens: 1,
          ...(mode ? { kvCacheReportMode: mode } : {}),
        },
        t + 0.5,
      );
      return { e, os: steps(drain(e)) };
    };
    const base = run();
    const full = run('full');
    const bStep = full.os.findIndex((s) => s.admitted.some((x) => x.requestId === 'b'));
    expect(full.os[bStep]?.admitted).toEqual([expect.objectContaining({ requestId: 'b', cachedTokens: 8 })]);
    const pHashes = blockHashesOf(full.e, { id: 'p', promptTokenIds: P, maxTokens: 1 });
    // Step 0 is a's first chunk (the whole budget, b is not looked up); every later step looks b up once.
    const perStep = full.os.map((s) => reannouncements(s.kvEvents).map((x) => x.blockHashes));
    expect(perStep.slice(0, bStep + 1)).toEqual([[], ...Array.from({ length: bStep }, () => [pHashes])]);
    expect(bStep).toBe(9);
    expect(perStep.slice(bStep + 1).flat()).toEqual([]);
    // Failed lookups change nothing either.
    const strip = (os: StepOutcome[]) =>
      JSON.stringify(
        os.map((s) => ({ ...s, kvEvents: s.kvEvents.filter((x) => !isCachedBlockReannouncement(x)) })),
      );
    expect(strip(full.os)).toBe(JSON.stringify(base.os));
    expect(full.e.snapshot()).toEqual(base.e.snapshot());
  });

  it('re-announces again after a preemption, each lookup with the hit it finds then', () => {
    // 6 usable blocks: a and b share S (2 blocks) and grow until b, the newest, is preempted.
    const S = prompt(8, 70);
    const e = toyEngine({ kvCapacityTokens: 28, maxNumBatchedTokens: 64, maxNumSeqs: 2 });
    e.addRequest({ id: 'a', promptTokenIds: [...S, ...prompt(4, 71)], maxTokens: 12, ignoreEos: true }, 0);
    const bInput: EngineRequestInput = {
      id: 'b',
      promptTokenIds: [...S, ...prompt(4, 72)],
      maxTokens: 12,
      ignoreEos: true,
      kvCacheReportMode: 'full',
    };
    e.addRequest(bInput, 0);
    const os = steps(drain(e));
    const bTokens = [
      ...bInput.promptTokenIds,
      ...os.flatMap((s) => s.tokens.filter((t) => t.requestId === 'b').flatMap((t) => t.tokenIds)),
    ];
    const bHashes = blockHashesOf(e, bInput, bTokens);
    const pre = os.findIndex((s) => s.preempted.includes('b'));
    const back = os.findIndex((s, i) => i > pre && s.scheduled.some((w) => w.requestId === 'b'));
    expect(pre).toBeGreaterThan(0);
    expect(back).toBeGreaterThan(pre + 1);

    const perStep = os.map((s) => reannouncements(s.kvEvents));
    // First admission: b hits S, which a cached earlier in the same step.
    expect(perStep[0]?.map((x) => x.blockHashes)).toEqual([bHashes.slice(0, 2)]);
    // Between preemption and readmission b is looked up once per step; no lookup while it runs.
    expect(perStep.slice(1, pre + 1).flat()).toEqual([]);
    for (let i = pre + 1; i <= back; i++) {
      const [re, ...more] = perStep[i] ?? [];
      expect(more).toEqual([]);
      const k = re?.blockHashes.length ?? 0;
      expect(k).toBeGreaterThanOrEqual(2);
      expect(re).toMatchObject({
        parentBlockHash: null,
        blockHashes: bHashes.slice(0, k),
        tokenIds: bTokens.slice(0, k * BS),
      });
    }
    // Readmission re-announces exactly the hit it starts from (its own blocks, output ones included).
    const readmitted = os[back]?.scheduled.find((w) => w.requestId === 'b');
    expect(perStep[back]?.[0]?.blockHashes.length).toBe((readmitted?.contextTokens ?? 0) / BS);
    expect(perStep.slice(pre + 1, back + 1).some((r) => (r[0]?.blockHashes.length ?? 0) > 2)).toBe(true);
    expect(perStep.slice(back + 1).flat()).toEqual([]);
  });
});
