import { describe, expect, it } from 'vitest';
import type { BlockKey } from '../../../src/core/types.js';
import { mergeOps, countOps } from '../../../src/collector/ops/merge-ops.js';
import { offsetEndpoint, streamsOf } from '../../../src/collector/pods.js';
import {
  AppliedWindow,
  classifyBehind,
  classifySeq,
  payloadDigest,
  type BehindFacts,
} from '../../../src/collector/sequence.js';
import { DropReport, dropExample } from '../../../src/collector/stream-stats.js';
import { createLogger } from '../../../src/collector/logger.js';
import { encodeSeq, parseLiveFrames, parseReplayFrames } from '../../../src/collector/wire/frames.js';

const k = (s: string): BlockKey => s.padStart(16, '0') as BlockKey;

describe('classifySeq', () => {
  it('tells first, next, gap and a number at or below the last apart', () => {
    expect(classifySeq(null, 7)).toEqual({ kind: 'first' });
    expect(classifySeq(4, 5)).toEqual({ kind: 'next' });
    expect(classifySeq(4, 9)).toEqual({ kind: 'gap', expected: 5, missing: 4 });
    expect(classifySeq(4, 0)).toEqual({ kind: 'behind' });
    expect(classifySeq(4, 4)).toEqual({ kind: 'behind' });
  });
});

describe('classifyBehind', () => {
  const f = (o: Partial<BehindFacts>): BehindFacts => ({
    applied: 'unknown',
    sameProcess: null,
    canAsk: false,
    newer: null,
    ...o,
  });

  it('the same bytes under a number already applied: a duplicate, whatever else is known', () => {
    expect(classifyBehind(f({ applied: 'same' }))).toBe('duplicate');
    expect(classifyBehind(f({ applied: 'same', newer: true, canAsk: true }))).toBe('duplicate');
  });

  it('other bytes under a number already applied: only a new process does that, or a forger: the replay buffer decides first', () => {
    expect(classifyBehind(f({ applied: 'different' }))).toBe('restart');
    expect(classifyBehind(f({ applied: 'different', canAsk: true }))).toBe('ask');
    expect(classifyBehind(f({ applied: 'different', sameProcess: true }))).toBe('out_of_order');
    expect(classifyBehind(f({ applied: 'different', sameProcess: false }))).toBe('restart');
  });

  it('not remembered: the replay buffer decides when there is one', () => {
    expect(classifyBehind(f({ canAsk: true }))).toBe('ask');
    expect(classifyBehind(f({ sameProcess: true }))).toBe('out_of_order');
    expect(classifyBehind(f({ sameProcess: false }))).toBe('restart');
  });

  it('without an answer: stamped after the last applied batch is a restart, else out of order', () => {
    expect(classifyBehind(f({ newer: true }))).toBe('restart');
    expect(classifyBehind(f({ newer: false }))).toBe('out_of_order');
    expect(classifyBehind(f({ newer: null }))).toBe('out_of_order');
  });
});

describe('AppliedWindow', () => {
  it('remembers the digests of the last N numbers applied', () => {
    const w = new AppliedWindow(4);
    const d = (s: string): string => payloadDigest(Buffer.from(s));
    for (let i = 0; i < 6; i++) w.record(i, d(`b${i}`));
    expect(w.lookup(5, d('b5'))).toBe('same');
    expect(w.lookup(2, d('b2'))).toBe('same');
    expect(w.lookup(2, d('other'))).toBe('different');
    expect(w.lookup(1, d('b1'))).toBe('unknown'); // overwritten by 5
    expect(w.lookup(9, d('b9'))).toBe('unknown');
    w.reset();
    expect(w.lookup(5, d('b5'))).toBe('unknown');
  });
});

describe('DropReport', () => {
  it('logs the first occurrence of each kind with its details, then one summary per period', () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('debug', (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
    let now = 1000;
    const r = new DropReport(log, 60_000, () => now);
    r.note('unknown_medium', 1, () => ({ medium: 'DISK' }));
    r.note('unknown_medium', 2, () => ({ medium: 'never asked' }));
    r.note('unknown_event', 1, () => ({ tag: 'BlockPinned' }));
    r.flush();
    expect(lines.map((l) => [l.level, l.kind, l.medium ?? l.tag])).toEqual([
      ['warn', 'unknown_medium', 'DISK'],
      ['warn', 'unknown_event', 'BlockPinned'],
    ]);
    now += 60_000;
    r.flush();
    expect(lines[2]).toMatchObject({ level: 'info', counts: { unknown_medium: 2 } });
    r.flush(true); // nothing new
    expect(lines).toHaveLength(3);
  });

  it('finds an example of what was dropped in the decoded batch', () => {
    const batch = [
      1.5,
      [
        ['BlockPinned', [1]],
        ['BlockStored', [1], null, [1, 2], 2, null, 'DISK'],
        { type: 'BlockRemoved', block_hashes: [1], medium: 'NVME' },
        42,
      ],
    ];
    expect(dropExample(batch, 'unknown_event')).toEqual({ tag: 'BlockPinned' });
    expect(dropExample(batch, 'unknown_medium')).toEqual({ medium: 'DISK' });
    const removed = { type: 'BlockRemoved', block_hashes: [1], medium: 'NVME' };
    expect(dropExample({ ts: 1, events: [removed] }, 'unknown_medium')).toEqual({ medium: 'NVME' });
    expect(dropExample(batch, 'not_tagged')).toEqual({ example: 'number' });
    expect(dropExample('garbage', 'unknown_event')).toEqual({});
  });
});

describe('frames', () => {
  it('reads [topic, seq8, payload] and rejects other shapes', () => {
    const payload = Buffer.from([0x90]);
    expect(parseLiveFrames([Buffer.from('kv'), encodeSeq(2 ** 40), payload])).toEqual({
      ok: true,
      msg: { seq: 2 ** 40, payload },
    });
    expect(parseLiveFrames([encodeSeq(1), payload]).ok).toBe(false);
    expect(parseLiveFrames([Buffer.alloc(0), Buffer.alloc(4), payload]).ok).toBe(false);
    expect(parseLiveFrames([Buffer.alloc(0), Buffer.alloc(8, 0xff), payload]).ok).toBe(false);
  });

  it('reads replay replies, the ff×8 end marker, and the inference-sim variant with a topic frame', () => {
    const empty = Buffer.alloc(0);
    expect(parseReplayFrames([empty, encodeSeq(3), Buffer.from([1])])).toMatchObject({
      kind: 'item',
      msg: { seq: 3 },
    });
    expect(parseReplayFrames([empty, Buffer.alloc(8, 0xff), empty])).toEqual({ kind: 'end' });
    expect(parseReplayFrames([empty, Buffer.from('t'), encodeSeq(4), Buffer.from([1])])).toMatchObject({
      kind: 'item',
      msg: { seq: 4 },
    });
    expect(parseReplayFrames([Buffer.from('x'), encodeSeq(3), empty]).kind).toBe('bad');
  });
});

describe('mergeOps', () => {
  it('merges neighbours of one kind and tier in order, and drops what a clear voids', () => {
    const merged = mergeOps([
      [{ op: 'store', tier: 'GPU', keys: [k('1')] }],
      [
        { op: 'store', tier: 'GPU', keys: [k('2')] },
        { op: 'remove', tier: 'GPU', keys: [k('1')] },
      ],
      [{ op: 'store', tier: 'GPU', keys: [k('3')] }],
    ]);
    expect(merged).toEqual([
      { op: 'store', tier: 'GPU', keys: [k('1'), k('2')] },
      { op: 'remove', tier: 'GPU', keys: [k('1')] },
      { op: 'store', tier: 'GPU', keys: [k('3')] },
    ]);
    expect(countOps(merged)).toBe(4);
    const input = [{ op: 'store' as const, tier: 'GPU' as const, keys: [k('9')] }];
    expect(mergeOps([input, [{ op: 'clear' }], [{ op: 'store', tier: 'CPU', keys: [k('4')] }]])).toEqual([
      { op: 'clear' },
      { op: 'store', tier: 'CPU', keys: [k('4')] },
    ]);
    expect(input[0]!.keys).toEqual([k('9')]); // inputs are not mutated
  });
});

describe('data-parallel streams', () => {
  it('offsets ports like vLLM (rank 0 unchanged) and names ranks <id>@dp<r>', () => {
    expect(offsetEndpoint('tcp://10.0.0.7:5557', 0)).toBe('tcp://10.0.0.7:5557');
    expect(offsetEndpoint('tcp://10.0.0.7:5557', 3)).toBe('tcp://10.0.0.7:5560');
    expect(offsetEndpoint('tcp://[::1]:5557', 1)).toBe('tcp://[::1]:5558');
    expect(offsetEndpoint('ipc:///tmp/kv', 2)).toBe('ipc:///tmp/kv_dp2');
    const base = {
      id: 'pod-a',
      model: 'm',
      address: 'h:8000',
      topic: '',
      kvEvents: 'tcp://h:5557',
      kvEventsReplay: 'tcp://h:5600',
    };
    expect(streamsOf({ ...base, dataParallelSize: 1 })).toEqual([
      {
        podId: 'pod-a',
        basePodId: 'pod-a',
        model: 'm',
        address: 'h:8000',
        rank: null,
        kvEvents: 'tcp://h:5557',
        kvEventsReplay: 'tcp://h:5600',
        topic: '',
      },
    ]);
    expect(
      streamsOf({ ...base, dataParallelSize: 2 }).map((s) => [s.podId, s.rank, s.kvEvents, s.kvEventsReplay]),
    ).toEqual([
      ['pod-a@dp0', 0, 'tcp://h:5557', 'tcp://h:5600'],
      ['pod-a@dp1', 1, 'tcp://h:5558', 'tcp://h:5601'],
    ]);
    // A hybrid-DP node with global ranks 2 and 3: ports + global rank, pod ids by the node's own index
    // (what X-data-parallel-rank takes); an external-DP server (one engine, rank 5) keeps its bare id.
    const ranks = (over: { dataParallelSize: number; dataParallelStartRank: number }) =>
      streamsOf({ ...base, ...over }).map((s) => [s.podId, s.rank, s.kvEvents, s.kvEventsReplay]);
    expect(ranks({ dataParallelSize: 2, dataParallelStartRank: 2 })).toEqual([
      ['pod-a@dp0', 2, 'tcp://h:5559', 'tcp://h:5602'],
      ['pod-a@dp1', 3, 'tcp://h:5560', 'tcp://h:5603'],
    ]);
    expect(ranks({ dataParallelSize: 1, dataParallelStartRank: 5 })).toEqual([
      ['pod-a', 5, 'tcp://h:5562', 'tcp://h:5605'],
    ]);
  });
});
