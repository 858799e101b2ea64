import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import { TIERS, type BlockKey } from '../../../src/core/types.js';
import type { IndexOp } from '../../../src/index/index.js';
import {
  APPLY_HEAD_ARGS,
  applyCalls,
  lookupCall,
  packBlockKeys,
  removePodCall,
  upsertPodCall,
} from '../../../src/index/script-args.js';

const base = 'kinf:{AbCdEfGh}:';
const ID = { writer: 'w1', seq: 42 };
const key = (i: number) => i.toString(16).padStart(16, '0') as BlockKey;

describe('script arguments', () => {
  it('packs block keys as 8 raw bytes each', () => {
    expect(packBlockKeys([key(1), 'ffeeddccbbaa9988' as BlockKey])).toEqual(
      Buffer.from([0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88]),
    );
    expect(packBlockKeys([])).toEqual(Buffer.alloc(0));
    expect(packBlockKeys([key(1), key(2), key(3)], 1, 2)).toEqual(Buffer.from(key(2), 'hex'));
    for (const bad of ['xyz', '0123456789abcdeg', '0123'])
      expect(() => packBlockKeys([bad as BlockKey])).toThrow(
        expect.objectContaining({ code: 'KINF_ERR_INTERNAL' }),
      );
  });

  it('lays out lookup: KEYS = pods hash; ARGV = base, packed keys', () => {
    expect(lookupCall(base, [key(7)])).toEqual({
      keys: [`${base}pods`],
      args: [base, Buffer.from(key(7), 'hex')],
    });
  });

  it('lays out apply: KEYS = pods, seq, applied; ARGV = base, pod, ttl, id, part, floor, then (op, keys) pairs', () => {
    const calls = applyCalls(
      base,
      'pod-a',
      3600.7,
      [
        { op: 'store', keys: [key(1), key(2)], tier: 'GPU' },
        { op: 'clear' },
        { op: 'remove', keys: [key(3)], tier: 'STORAGE' },
        { op: 'store', keys: [], tier: 'CPU' },
      ],
      100,
      ID,
      { writer: 'w1', seq: 40, part: 2 },
    );
    expect(calls).toEqual([
      {
        keys: [`${base}pods`, `${base}seq`, `${base}applied`],
        args: [
          base,
          'pod-a',
          '3600',
          'w1',
          '42',
          '1',
          'w1:40:2',
          's0',
          packBlockKeys([key(1), key(2)]),
          'c',
          '',
          'r2',
          packBlockKeys([key(3)]),
        ],
      },
    ]);
    expect(applyCalls(base, 'p', 0, [], 10, ID)).toEqual([]);
    expect(applyCalls(base, 'p', 0, [{ op: 'store', keys: [], tier: 'GPU' }], 10, ID)).toEqual([]);
    expect(() => applyCalls(base, 'p', 0, [], 0, ID)).toThrow();
    for (const bad of [
      { writer: '', seq: 1 },
      { writer: 'a:b', seq: 1 },
      { writer: 'w', seq: 0 },
      { writer: 'w', seq: 1.5 },
    ])
      expect(() => applyCalls(base, 'p', 0, [{ op: 'clear' }], 10, bad)).toThrow(
        expect.objectContaining({ code: 'KINF_ERR_INTERNAL' }),
      );
  });

  it('numbers the calls of a split apply as parts 1..n of one id, all with the same floor', () => {
    const keys = Array.from({ length: 10 }, (_, i) => key(i));
    const calls = applyCalls(base, 'p', 0, [{ op: 'store', keys, tier: 'GPU' }], 4, ID, null);
    expect(calls.map((c) => c.args.slice(3, 7))).toEqual([
      ['w1', '42', '1', ''],
      ['w1', '42', '2', ''],
      ['w1', '42', '3', ''],
    ]);
    // deterministic: a retry of the same ops resends exactly the same calls
    expect(applyCalls(base, 'p', 0, [{ op: 'store', keys, tier: 'GPU' }], 4, ID, null)).toEqual(calls);
  });

  it('splits big batches at maxKeysPerCall, keeping every op in order', () => {
    const opArb: fc.Arbitrary<IndexOp> = fc.oneof(
      fc.record({
        op: fc.constantFrom('store' as const, 'remove' as const),
        keys: fc.array(fc.nat({ max: 1e6 }).map(key), { maxLength: 30 }),
        tier: fc.constantFrom(...TIERS),
      }),
      fc.constant({ op: 'clear' as const }),
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 12 }), fc.integer({ min: 1, max: 20 }), (ops, max) => {
        const calls = applyCalls(base, 'pod', 60, ops, max, ID);
        // Flatten the calls back into (code, key) steps and compare with the ops.
        const got: string[] = [];
        for (const c of calls) {
          expect(c.args.slice(0, 3)).toEqual([base, 'pod', '60']);
          let keysInCall = 0;
          for (let i = APPLY_HEAD_ARGS; i < c.args.length; i += 2) {
            const code = c.args[i] as string;
            const blob = c.args[i + 1] as Buffer | string;
            if (code === 'c') got.push('c');
            else {
              const b = blob as Buffer;
              expect(b.length % 8).toBe(0);
              expect(b.length).toBeGreaterThan(0);
              keysInCall += b.length / 8;
              for (let o = 0; o < b.length; o += 8)
                got.push(`${code}:${b.subarray(o, o + 8).toString('hex')}`);
            }
          }
          expect(keysInCall).toBeLessThanOrEqual(max);
        }
        const want = ops.flatMap((o) =>
          o.op === 'clear'
            ? ['c']
            : o.keys.map((k) => `${o.op === 'store' ? 's' : 'r'}${TIERS.indexOf(o.tier)}:${k}`),
        );
        expect(got).toEqual(want);
      }),
    );
  });

  it('lays out upsert-pod and remove-pod', () => {
    const call = upsertPodCall(base, 'pod-a', { running: 3, healthy: false });
    expect(call.keys).toEqual([`${base}pods`, `${base}seq`]);
    expect(call.args.slice(0, 4)).toEqual([base, 'pod-a', 'id', 'pod-a']);
    const pairs = new Map<unknown, unknown>();
    for (let i = 4; i < call.args.length; i += 2) pairs.set(call.args[i], call.args[i + 1]);
    expect(pairs).toEqual(
      new Map([
        ['running', '3'],
        ['healthy', '0'],
      ]),
    );
    expect(removePodCall(base, 'pod-a')).toEqual({
      keys: [`${base}pods`, `${base}applied`],
      args: [base, 'pod-a'],
    });
  });

  it('fences a write on the model’s lease, or on a collector shard’s own lease (i/n)', () => {
    expect(removePodCall(base, 'pod-a', 'me')).toEqual({
      keys: [`${base}pods`, `${base}applied`, `${base}writer`],
      args: [base, 'pod-a', 'me'],
    });
    expect(removePodCall(base, 'pod-a', { holderValue: 'me', shard: '' }).keys[2]).toBe(`${base}writer`);
    expect(removePodCall(base, 'pod-a', { holderValue: 'me', shard: '1/4' })).toEqual({
      keys: [`${base}pods`, `${base}applied`, `${base}writer:1/4`],
      args: [base, 'pod-a', 'me'],
    });
    const [call] = applyCalls(base, 'p', 0, [{ op: 'clear' }], 10, ID, null, {
      holderValue: 'me',
      shard: '0/2',
    });
    expect(call!.keys.at(-1)).toBe(`${base}writer:0/2`);
    expect(call!.args[APPLY_HEAD_ARGS]).toBe('me');
  });

  it('refuses keys that are not 16 hex digits with a coded error', () => {
    try {
      lookupCall(base, ['nothex' as BlockKey]);
      expect.unreachable();
    } catch (e) {
      expect(isKinferenceError(e, 'KINF_ERR_INTERNAL')).toBe(true);
    }
  });
});
