import { describe, expect, it } from 'vitest';
import type { BlockStoredEvent } from '../../../src/collector/events.js';
import {
  HANDOFF_VERSION,
  decodeHandoff,
  encodeHandoff,
  handoffMismatch,
  type StreamHandoff,
} from '../../../src/collector/handoff.js';
import { KeyMapper, newMapperCounters } from '../../../src/collector/key-mapper.js';
import { AppliedWindow } from '../../../src/collector/sequence.js';
import type { BlockKey, VllmBlockHash } from '../../../src/core/types.js';
import { REFCOUNT_MAX, type IndexOp } from '../../../src/index/index.js';
import { storedEvent } from '../../helpers/collector/mapper-events.js';

const MODEL = 'Qwen/Qwen3-8B';
const BS = 4;
const h = (n: number): VllmBlockHash => String(n) as VllmBlockHash;
const tokens = (n: number, from: number): number[] => Array.from({ length: n }, (_, i) => from + i);

/** Blocks `hashes` (numbered) after `parent`, their tokens counting up from `from`. */
const stored = (
  hashes: number[],
  parent: number | null,
  from: number,
  over: Partial<BlockStoredEvent> = {},
) =>
  storedEvent(BS, {
    hashes: hashes.map(h),
    parent: parent === null ? null : h(parent),
    tokenIds: tokens(hashes.length * BS, from),
    ...over,
  });

function handoff(over: Partial<StreamHandoff> = {}): StreamHandoff {
  return {
    v: HANDOFF_VERSION,
    model: MODEL,
    podId: 'pod-a',
    endpoint: 'tcp://10.0.0.7:5557',
    topic: 'kv',
    blockSize: BS,
    lastSeq: 41,
    lastTsSec: 1.7e9,
    window: [
      [40, 'd40'],
      [41, 'd41'],
    ],
    bufferKeeps: true,
    partialSinceMs: 0,
    processStartSec: 1.69e9,
    mapper: { entries: [[h(123), '00000000000000ab' as BlockKey, 2, 1, 0]], otherGroups: [1] },
    savedAtMs: 1_700_000_000_000,
    ...over,
  };
}

describe('collector handoff record', () => {
  it('round-trips through its encoding', () => {
    const x = handoff();
    expect(decodeHandoff(encodeHandoff(x))).toEqual({ ok: true, handoff: x });
  });

  it('refuses a record it cannot trust, naming what is wrong', () => {
    const bad = (over: Record<string, unknown>): string | null => {
      const d = decodeHandoff(JSON.stringify({ ...handoff(), ...over }));
      return d.ok ? null : d.detail;
    };
    const entries = (e: unknown[]) => ({ mapper: { entries: [e], otherGroups: [] } });
    expect(decodeHandoff('{"v":1,')).toEqual({ ok: false, detail: 'not JSON' });
    expect(decodeHandoff('[1]')).toEqual({ ok: false, detail: 'not an object' });
    expect(bad({ v: 2 })).toBe('version 2, not 1');
    expect(bad({ lastSeq: -1 })).toBe('lastSeq');
    expect(bad({ topic: null })).toBe('topic');
    expect(bad({ window: [[1]] })).toBe('window entry');
    expect(bad(entries(['12x', null, 0, 0, 0]))).toBe('entry hash');
    expect(bad(entries(['12', 'ABCDEF0123456789', 1, 0, 0]))).toBe('entry key');
    expect(bad(entries(['12', '00000000000000ab', REFCOUNT_MAX + 1, 0, 0]))).toBe('entry counts');
    expect(bad(entries(['12', null, 1, 0, 0]))).toBe('counts on an unindexable entry');
    expect(bad({ mapper: { entries: [], otherGroups: [-1] } })).toBe('otherGroups');
  });

  it('describes one stream only: another endpoint, topic, pod or block size is a mismatch', () => {
    const s = { model: MODEL, podId: 'pod-a', endpoint: 'tcp://10.0.0.7:5557', topic: 'kv', blockSize: BS };
    expect(handoffMismatch(handoff(), s)).toBeNull();
    expect(handoffMismatch(handoff(), { ...s, endpoint: 'tcp://10.0.0.8:5557' })).toBe(
      'endpoint was "tcp://10.0.0.7:5557", is "tcp://10.0.0.8:5557"',
    );
    expect(handoffMismatch(handoff(), { ...s, blockSize: 16 })).toBe('blockSize was 4, is 16');
  });
});

describe('KeyMapper snapshot and restore', () => {
  it('a restored mapper knows what the original knew: parents, copies per tier, groups that are not ours', () => {
    const a = new KeyMapper(MODEL, BS, 100);
    const c = newMapperCounters();
    a.toOps(
      [
        stored([1, 2], null, 1),
        stored([2], 1, 5), // a second physical copy of block 2
        stored([9], null, 100, { specKind: 'sliding_window', groupIdx: 3 }),
        storedEvent(BS, { hashes: [h(1)], tokenIds: [], tier: 'CPU' }), // an offloaded copy of block 1
      ],
      c,
    );
    const b = new KeyMapper(MODEL, BS, 100);
    expect(b.restore(a.snapshot(), newMapperCounters())).toEqual([]);
    expect(b.snapshot()).toEqual(a.snapshot());
    const next = [
      stored([3], 2, 9), // chained from a parent only the snapshot knows
      { kind: 'removed' as const, hashes: [h(2)], tier: 'GPU' as const, groupIdx: null },
      { kind: 'removed' as const, hashes: [h(9)], tier: 'GPU' as const, groupIdx: 3 },
      { kind: 'removed' as const, hashes: [h(1)], tier: 'CPU' as const, groupIdx: null },
    ];
    const [ca, cb] = [newMapperCounters(), newMapperCounters()];
    const ops = b.toOps(next, cb);
    expect(ops).toEqual(a.toOps(next, ca));
    expect(ops.map((o) => o.op + (o.op === 'clear' ? '' : `:${o.tier}:${o.keys.length}`))).toEqual([
      'store:GPU:1',
      'remove:GPU:1',
      'remove:CPU:1',
    ]);
    expect(cb.skipped).toEqual(ca.skipped);
    expect(cb.skipped.non_full_attention).toBe(1);
  });

  it('into a smaller map, keeps the most recent entries and removes the older held blocks from the index', () => {
    const a = new KeyMapper(MODEL, BS, 100);
    const c = newMapperCounters();
    const stores = a.toOps([stored([1, 2, 3, 4], null, 1)], c);
    const b = new KeyMapper(MODEL, BS, 2);
    const cb = newMapperCounters();
    const ops: IndexOp[] = b.restore(a.snapshot(), cb);
    const keys = (stores[0] as { keys: string[] }).keys;
    expect(ops).toEqual([{ op: 'remove', tier: 'GPU', keys: keys.slice(0, 2) }]);
    expect(b.snapshot().entries.map((e) => e[0])).toEqual([h(3), h(4)]);
    expect(cb.evictionRemovals).toBe(2);
  });
});

describe('AppliedWindow entries and restore', () => {
  it('hands over the digests it remembers, oldest first', () => {
    const w = new AppliedWindow(4);
    for (let s = 0; s < 6; s++) w.record(s, `d${s}`);
    expect(w.entries()).toEqual([
      [2, 'd2'],
      [3, 'd3'],
      [4, 'd4'],
      [5, 'd5'],
    ]);
    const v = new AppliedWindow(4);
    v.restore(w.entries());
    expect(v.lookup(5, 'd5')).toBe('same');
    expect(v.lookup(4, 'other')).toBe('different');
    expect(v.lookup(1, 'd1')).toBe('unknown');
  });
});
