import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Engine } from '../../../emulator/engine/engine.js';
import { isCachedBlockReannouncement } from '../../../emulator/engine/kv-cache-manager.js';
import type { EngineOutcome, EngineRequestInput, KvCacheEvent } from '../../../emulator/engine/types.js';
import { blockHashesOf, drain, engineCachedAsWire, EventReplica, toyEngine } from './engine-harness.js';

type Op =
  | {
      kind: 'add';
      dt: number;
      prompt: number;
      unique: number;
      maxTokens: number;
      ignoreEos: boolean;
      salt: boolean;
      lora: boolean;
      skip: boolean;
      full: boolean;
    }
  | { kind: 'abort'; dt: number; which: number }
  | { kind: 'reset'; dt: number }
  | { kind: 'advance'; dt: number };

const BASE = [0, 1].map((p) => Array.from({ length: 60 }, (_, i) => 10 + ((i * 7 + p * 131) % 400)));
const tail = (n: number, v: number): number[] =>
  Array.from({ length: n }, (_, i) => 500 + ((v * 13 + i) % 97));
/** A small catalogue, so that shared prefixes, exact repeats and block-aligned repeats (block size 4) are common. */
const CATALOGUE: number[][] = [
  BASE[0]!.slice(0, 16),
  BASE[0]!.slice(0, 24),
  BASE[0]!.slice(0, 23),
  [...BASE[0]!.slice(0, 16), ...tail(5, 1)],
  BASE[1]!.slice(0, 40),
  [...BASE[1]!.slice(0, 40), ...tail(8, 2)],
  [...BASE[1]!.slice(0, 12), ...tail(30, 3)],
];

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.record({
      kind: fc.constant('add' as const),
      dt: fc.integer({ min: 0, max: 40 }),
      // Index past the catalogue = a unique prompt of `unique` tokens.
      prompt: fc.integer({ min: 0, max: CATALOGUE.length }),
      unique: fc.integer({ min: 1, max: 30 }),
      maxTokens: fc.integer({ min: 1, max: 24 }),
      ignoreEos: fc.boolean(),
      salt: fc.constantFrom(false, false, false, false, true),
      lora: fc.constantFrom(false, false, false, false, true),
      skip: fc.constantFrom(false, false, false, false, false, true),
      // vllm_xargs.kv_cache_report_mode "full": hits are re-announced as BlockStored.
      full: fc.constantFrom(false, false, true),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('abort' as const),
      dt: fc.integer({ min: 0, max: 40 }),
      which: fc.nat(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('reset' as const), dt: fc.integer({ min: 0, max: 200 }) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), dt: fc.integer({ min: 0, max: 80 }) }),
  },
);

const configArb = fc.record({
  blocks: fc.integer({ min: 16, max: 64 }),
  budget: fc.integer({ min: 4, max: 40 }),
  maxNumSeqs: fc.integer({ min: 1, max: 6 }),
  seed: fc.integer({ min: 0, max: 1000 }),
});

interface RunResult {
  outcomes: EngineOutcome[];
  inputs: Map<string, EngineRequestInput>;
  problems: string[];
}

function check(engine: Engine, problems: string[], where: string): void {
  const s = engine.snapshot();
  for (const p of engine.checkInvariants()) problems.push(`${where}: ${p}`);
  if (s.numFreeBlocks + s.numUsedBlocks !== s.capacityBlocks)
    problems.push(`${where}: free ${s.numFreeBlocks} + used ${s.numUsedBlocks} != ${s.capacityBlocks}`);
}

/** Drives the engine through ops, replaying its event stream into a reference and checking each admission. */
function run(
  cfg: { blocks: number; budget: number; maxNumSeqs: number; seed: number },
  ops: Op[],
): RunResult {
  const engine = toyEngine({
    kvCapacityTokens: cfg.blocks * 4,
    maxNumBatchedTokens: cfg.budget,
    maxNumSeqs: cfg.maxNumSeqs,
    seed: cfg.seed,
  });
  const replica = new EventReplica();
  const inputs = new Map<string, EngineRequestInput>();
  const problems: string[] = [];
  const outcomes: EngineOutcome[] = [];
  const live: string[] = [];
  let now = 0;
  let n = 0;
  let lastEnd = 0;
  /** Times of successful resets not yet seen in a step: each AllBlocksCleared is queued, not yet published. */
  let pendingClears: number[] = [];

  /** Tokens each request holds so far (prompt, then sampled outputs): what a re-announcement may cover. */
  const sequences = new Map<string, number[]>();

  /**
   * A "full" report mode re-announcement re-states a hit: the pool did not change, so the replica must not count
   * it (it would hold a reference no BlockRemoved ever drops). It must still be true: parent null, the first n
   * blocks (hashes and tokens) of a "full" request, each one cached per the stream so far.
   */
  const reannounced = (e: KvCacheEvent): boolean => {
    if (!isCachedBlockReannouncement(e)) return false;
    if (e.type !== 'BlockStored') {
      problems.push(`re-announcement of type ${e.type}`);
      return true;
    }
    const k = e.blockHashes.length;
    const bs = engine.blockSize;
    // Any full-mode request, not only live ones: an abort between a step's start and end is consumed before
    // that step's outcome, whose events were emitted while the request still waited.
    const source = [...sequences].find(([id, seq]) => {
      const input = inputs.get(id) as EngineRequestInput;
      return (
        input.kvCacheReportMode === 'full' &&
        k > 0 &&
        k * bs < seq.length &&
        JSON.stringify(blockHashesOf(engine, input, seq).slice(0, k)) === JSON.stringify(e.blockHashes) &&
        JSON.stringify(seq.slice(0, k * bs)) === JSON.stringify(e.tokenIds)
      );
    });
    if (e.parentBlockHash !== null || source === undefined)
      problems.push(`re-announcement of ${k} blocks is no full-mode request's prefix`);
    if (!e.blockHashes.every((h) => replica.holds(h)))
      problems.push(`re-announcement of ${k} blocks names blocks the stream does not show cached`);
    return true;
  };

  const consume = (os: EngineOutcome[]): void => {
    for (const o of os) {
      outcomes.push(o);
      if (o.kind === 'step') {
        if (o.startMs < lastEnd)
          problems.push(`step at ${o.startMs} overlaps the previous one ending ${lastEnd}`);
        lastEnd = o.endMs;
        // vLLM publishes a reset's AllBlocksCleared with the next step's batch, ahead of that step's events
        // (a step that started before the reset does not carry it).
        const due = pendingClears.filter((t) => t <= o.startMs).length;
        pendingClears = pendingClears.filter((t) => t > o.startMs);
        const lead = o.kvEvents.findIndex((e) => e.type !== 'AllBlocksCleared');
        if ((lead < 0 ? o.kvEvents.length : lead) !== due)
          problems.push(`step at ${o.startMs}: ${due} queued clears, batch ${JSON.stringify(o.kvEvents)}`);
        // Each admission's hit must equal the longest cached prefix the event stream shows at that point.
        for (let i = 0; i <= o.kvEvents.length; i++) {
          for (const a of o.admitted.filter((x) => x.eventIndex === i)) {
            const want = replica.longestPrefixTokens(engine, inputs.get(a.requestId) as EngineRequestInput);
            if (a.cachedTokens !== want)
              problems.push(`${a.requestId}: hit ${a.cachedTokens} tokens, stream says ${want}`);
            // A "full" admission with a hit: its own lookup's re-announcement of exactly that hit comes first.
            // (Without the mode the event here may be a later request's, so there is nothing to check.)
            if (inputs.get(a.requestId)?.kvCacheReportMode === 'full' && a.cachedTokens > 0) {
              const re = o.kvEvents[i];
              if (
                re === undefined ||
                !isCachedBlockReannouncement(re) ||
                re.type !== 'BlockStored' ||
                re.blockHashes.length * engine.blockSize !== a.cachedTokens
              )
                problems.push(`${a.requestId}: hit ${a.cachedTokens} tokens, then ${JSON.stringify(re)}`);
            }
          }
          const e = o.kvEvents[i];
          if (e !== undefined && !reannounced(e)) replica.apply(e);
        }
        for (const t of o.tokens) sequences.get(t.requestId)?.push(...t.tokenIds);
      } else for (const e of o.kvEvents) if (!reannounced(e)) replica.apply(e);
      for (const f of o.finished) {
        const i = live.indexOf(f.requestId);
        if (i >= 0) live.splice(i, 1);
        const input = inputs.get(f.requestId) as EngineRequestInput;
        if (f.outputTokens > input.maxTokens) problems.push(`${f.requestId}: ${f.outputTokens} > max_tokens`);
        if (f.reason === 'length' && f.outputTokens !== input.maxTokens)
          problems.push(`${f.requestId}: length at ${f.outputTokens}`);
        if (f.reason === 'stop' && input.ignoreEos)
          problems.push(`${f.requestId}: stopped despite ignore_eos`);
      }
    }
  };

  for (const op of ops) {
    now += op.dt;
    if (op.kind === 'add') {
      const id = `r${n++}`;
      const promptTokenIds = CATALOGUE[op.prompt] ?? tail(op.unique, 1000 + n);
      const input: EngineRequestInput = {
        id,
        promptTokenIds,
        maxTokens: op.maxTokens,
        ignoreEos: op.ignoreEos,
        cacheSalt: op.salt ? 'salt-1' : null,
        loraName: op.lora ? 'lora-a' : null,
        loraId: op.lora ? 1 : null,
        skipPrefixCache: op.skip,
        kvCacheReportMode: op.full ? 'full' : 'incremental',
      };
      const r = engine.addRequest(input, now);
      if (r.ok) {
        inputs.set(id, input);
        sequences.set(id, [...promptTokenIds]);
        live.push(id);
      }
    } else if (op.kind === 'abort') {
      if (live.length > 0) engine.abortRequest(live[op.which % live.length]!, now);
    } else if (op.kind === 'reset') {
      if (engine.resetPrefixCache(now)) pendingClears.push(now);
    }
    consume(engine.advanceTo(now));
    check(engine, problems, `t=${now}`);
  }
  consume(drain(engine));
  check(engine, problems, 'end');
  // An idle engine publishes nothing: a clear still queued reaches subscribers only with a later step.
  if (pendingClears.length > 0) replica.apply({ type: 'AllBlocksCleared' });
  if (live.length > 0) problems.push(`requests never finished: ${live.join(',')}`);
  const s = engine.snapshot();
  if (s.numUsedBlocks !== 0) problems.push(`${s.numUsedBlocks} blocks still used when idle`);
  const fromEngine = engineCachedAsWire(engine);
  if (JSON.stringify([...fromEngine].sort()) !== JSON.stringify([...replica.counts].sort()))
    problems.push(`replayed events hold ${replica.counts.size} hashes, engine caches ${fromEngine.size}`);
  return { outcomes, inputs, problems };
}

describe('engine invariants (property)', () => {
  it('conserves blocks, hits only (and exactly) the cached prefixes the event stream shows, and replays to its cache', () => {
    fc.assert(
      fc.property(configArb, fc.array(opArb, { minLength: 5, maxLength: 60 }), (cfg, ops) => {
        const r = run(cfg, ops);
        expect(r.problems).toEqual([]);
      }),
      { numRuns: 150 },
    );
  });

  it('is deterministic for a seed', () => {
    fc.assert(
      fc.property(configArb, fc.array(opArb, { minLength: 1, maxLength: 25 }), (cfg, ops) => {
        const a = run(cfg, ops);
        const b = run(cfg, ops);
        expect(JSON.stringify(b.outcomes)).toBe(JSON.stringify(a.outcomes));
      }),
      { numRuns: 30 },
    );
  });

  it('samples different outputs for different seeds', () => {
    const ops: Op[] = [
      {
        kind: 'add',
        dt: 0,
        prompt: 3,
        unique: 1,
        maxTokens: 20,
        ignoreEos: true,
        salt: false,
        lora: false,
        skip: false,
        full: false,
      },
    ];
    const tokens = (seed: number): number[] =>
      run({ blocks: 40, budget: 32, maxNumSeqs: 4, seed }, ops).outcomes.flatMap((o) =>
        o.kind === 'step' ? o.tokens.flatMap((t) => t.tokenIds) : [],
      );
    expect(tokens(1)).toHaveLength(20);
    expect(tokens(1)).toEqual(tokens(1));
    expect(tokens(2)).not.toEqual(tokens(1));
  });
});
