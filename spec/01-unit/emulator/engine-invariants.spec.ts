import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Engine } from '../../../emulator/engine/engine.js';
import type { EngineOutcome, EngineRequestInput } from '../../../emulator/engine/types.js';
import { drain, engineCachedAsWire, EventReplica, toyEngine } from './engine-harness.js';

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

  const consume = (os: EngineOutcome[]): void => {
    for (const o of os) {
      outcomes.push(o);
      if (o.kind === 'step') {
        if (o.startMs < lastEnd)
          problems.push(`step at ${o.startMs} overlaps the previous one ending ${lastEnd}`);
        lastEnd = o.endMs;
        // Each admission's hit must equal the longest cached prefix the event stream shows at that point.
        for (let i = 0; i <= o.kvEvents.length; i++) {
          for (const a of o.admitted.filter((x) => x.eventIndex === i)) {
            const want = replica.longestPrefixTokens(engine, inputs.get(a.requestId) as EngineRequestInput);
            if (a.cachedTokens !== want)
              problems.push(`${a.requestId}: hit ${a.cachedTokens} tokens, stream says ${want}`);
          }
          if (i < o.kvEvents.length) replica.apply(o.kvEvents[i]!);
        }
      } else for (const e of o.kvEvents) replica.apply(e);
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
      };
      const r = engine.addRequest(input, now);
      if (r.ok) {
        inputs.set(id, input);
        live.push(id);
      }
    } else if (op.kind === 'abort') {
      if (live.length > 0) engine.abortRequest(live[op.which % live.length]!, now);
    } else if (op.kind === 'reset') engine.resetPrefixCache(now);
    consume(engine.advanceTo(now));
    check(engine, problems, `t=${now}`);
  }
  consume(drain(engine));
  check(engine, problems, 'end');
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
