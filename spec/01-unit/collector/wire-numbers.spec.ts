import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../../src/collector/events.js';
import {
  MAX_BLOCK_SIZE,
  MAX_DP_RANK,
  MAX_TOKEN_ID,
  MAX_TS_SEC,
  parseVllmBatch,
} from '../../../src/collector/wire/vllm-events.js';
import { encodeMsgspec, f64, type MsgValue } from '../../helpers/collector/msgspec-encoder.js';

/**
 * Issue #36, item 1: every number from the wire is checked before the collector does arithmetic with it,
 * observes it or writes it. A finite double can still overflow once scaled: ts = −1e306 s is −Infinity in
 * ms, which reached prom-client's histogram and ended the process.
 */

/** Numbers no engine sends, as msgpack can carry them: doubles (f64) and 64-bit ints (bigint). */
const EXTREME: MsgValue[] = [
  f64(1e308),
  f64(-1e308),
  f64(-1e306),
  f64(Number.MAX_VALUE),
  f64(-Number.MAX_VALUE),
  f64(-0),
  f64(5e-324),
  f64(-5e-324),
  f64(2.2250738585072014e-308),
  f64(Number.NaN),
  f64(Infinity),
  f64(-Infinity),
  f64(0.5),
  f64(2 ** 53),
  f64(2 ** 64),
  2n ** 64n - 1n,
  2n ** 63n,
  -(2n ** 63n),
  -1,
  -32,
  -129,
  -(2 ** 31),
  2 ** 31,
  2 ** 32 - 1,
  Number.MAX_SAFE_INTEGER,
  -Number.MAX_SAFE_INTEGER,
];

const stored = (o: Partial<Record<number, MsgValue>> = {}): MsgValue[] => {
  const e: MsgValue[] = [
    'BlockStored',
    [2n ** 63n + 5n],
    null,
    Array.from({ length: 16 }, (_, i) => i + 1),
    16,
    null,
    'GPU',
    null,
    null,
    null,
    null,
    null,
  ];
  for (const [k, v] of Object.entries(o)) e[Number(k)] = v!;
  return e;
};

const decode = (v: MsgValue) => parseVllmBatch(encodeMsgspec(v));

/** What every decoded batch must satisfy: numbers the collector can compute with and export. */
function expectSane(b: KvEventBatch): void {
  expect(Number.isFinite(b.tsSec) && b.tsSec >= 0 && b.tsSec <= MAX_TS_SEC).toBe(true);
  expect(Number.isFinite(b.tsSec * 1000)).toBe(true);
  if (b.dataParallelRank !== null) {
    expect(Number.isInteger(b.dataParallelRank)).toBe(true);
    expect(b.dataParallelRank >= 0 && b.dataParallelRank <= MAX_DP_RANK).toBe(true);
  }
  for (const e of b.events) {
    if (e.kind === 'cleared') continue;
    for (const h of e.hashes) expect(h).toMatch(/^(-?[1-9][0-9]*|0|[0-9a-f]+)$/);
    if (e.groupIdx !== null) expect(Number.isSafeInteger(e.groupIdx) && e.groupIdx >= 0).toBe(true);
    if (e.kind !== 'stored') continue;
    if (e.parent !== null) expect(e.parent).toMatch(/^(-?[1-9][0-9]*|0|[0-9a-f]+)$/);
    expect(Number.isInteger(e.blockSize) && e.blockSize >= 1 && e.blockSize <= MAX_BLOCK_SIZE).toBe(true);
    expect(Number.isSafeInteger(e.hashes.length * e.blockSize)).toBe(true);
    for (const t of e.tokenIds) {
      expect(Number.isInteger(t) && t >= 0 && t <= MAX_TOKEN_ID).toBe(true);
      expect(Object.is(t, -0)).toBe(false);
    }
  }
}

describe('wire numbers: checked at the decoder, before any arithmetic, metric or write', () => {
  it('a batch whose ts is finite in seconds but not in milliseconds is rejected as out_of_range (the crash of #36)', () => {
    for (const ts of [-1e306, -1.8e305, 1e308, -1, 1e12, Number.NaN, Infinity]) {
      const r = decode([f64(ts), [stored()], 0]);
      expect(r.ok ? 'ok' : r.reason, `ts ${ts}`).toBe('out_of_range');
    }
    const big = decode([2n ** 64n - 1n, [stored()], 0]);
    expect(big.ok ? 'ok' : big.reason).toBe('out_of_range');
    // A real clock, a simulated one from 0, and -0 (which is 0) stay valid.
    for (const ts of [1_700_000_000.25, 0, 5, -0]) {
      const r = decode([f64(ts), [stored()], 0]);
      expect(r.ok, `ts ${ts}`).toBe(true);
      if (r.ok) expect(Object.is(r.batch.tsSec, -0)).toBe(false);
    }
  });

  it('an event with an extreme number in any numeric field is dropped as out_of_range; the batch keeps the rest', () => {
    // 1 block_hashes[0], 2 parent, 3 token_ids[0], 4 block_size, 5 lora_id, 9 group_idx
    const cases: [string, (x: MsgValue) => MsgValue[]][] = [
      ['hash', (x) => stored({ 1: [x] })],
      ['parent', (x) => stored({ 2: x })],
      ['token', (x) => stored({ 3: [x, ...Array.from({ length: 15 }, () => 1)] })],
      ['block_size', (x) => stored({ 4: x })],
      ['lora_id', (x) => stored({ 5: x })],
      ['group_idx', (x) => stored({ 9: x })],
      ['removed hash', (x) => ['BlockRemoved', [x], 'GPU', null]],
    ];
    for (const [field, make] of cases)
      for (const x of EXTREME) {
        const r = decode([f64(1_700_000_000), [make(x), ['BlockRemoved', [7], 'GPU']], 0]);
        expect(r.ok, `${field} = ${String(x)}`).toBe(true);
        if (!r.ok) continue;
        expectSane(r.batch);
        // The good event always survives; the extreme one survives only where the value is legal there.
        expect(r.batch.events.at(-1)).toEqual({
          kind: 'removed',
          hashes: ['7'],
          tier: 'GPU',
          groupIdx: null,
        });
        const dropped = r.batch.invalidEvents.out_of_range ?? 0;
        expect(dropped + r.batch.events.length, `${field} = ${String(x)}`).toBe(2);
      }
  });

  it('a data_parallel_rank out of range rejects the batch as out_of_range', () => {
    for (const x of [-1, 65_536, f64(0.5), f64(1e308), f64(Number.NaN), 2n ** 64n - 1n]) {
      const r = decode([f64(1_700_000_000), [], x]);
      expect(r.ok ? 'ok' : r.reason, `rank ${String(x)}`).toBe('out_of_range');
    }
  });

  it('-0 is 0: as a token id, a hash, a parent (no parent) and a block field', () => {
    const r = decode([
      f64(1),
      [stored({ 1: [f64(-0)], 3: [f64(-0), ...Array.from({ length: 15 }, () => 2)] })],
      0,
    ]);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const e = r.batch.events[0]!;
    expect(e).toMatchObject({ kind: 'stored', hashes: ['0'], parent: null });
    if (e.kind === 'stored') expect(Object.is(e.tokenIds[0], -0)).toBe(false);
  });

  it('property: any numbers anywhere in a batch never throw, and whatever decodes is sane', () => {
    const num = fc.oneof(
      fc.constantFrom(...EXTREME),
      fc.double().map(f64),
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
      fc.integer({ min: -(2 ** 31), max: 2 ** 32 }),
    );
    const any: fc.Arbitrary<MsgValue> = fc.oneof(num, fc.constant(null), fc.string({ maxLength: 4 }));
    const event = fc.tuple(
      fc.constantFrom('BlockStored', 'BlockRemoved', 'AllBlocksCleared'),
      fc.array(num, { maxLength: 3 }),
      any,
      fc.array(num, { maxLength: 20 }),
      any,
      any,
      fc.constantFrom<MsgValue>('GPU', 'CPU', null),
      fc.constant(null),
      fc.constant(null),
      any,
    );
    fc.assert(
      fc.property(num, fc.array(event, { maxLength: 4 }), fc.option(num), (ts, events, rank) => {
        const r = decode([ts, events as unknown as MsgValue[], rank ?? null]);
        if (r.ok) expectSane(r.batch);
        else expect(['batch_field', 'out_of_range', 'batch_shape']).toContain(r.reason);
      }),
      { numRuns: 2000, seed: 36 },
    );
  });
});
