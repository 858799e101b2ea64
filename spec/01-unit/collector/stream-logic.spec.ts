import { describe, expect, it } from 'vitest';
import type { BlockKey } from '../../../src/core/types.js';
import { mergeOps, countOps } from '../../../src/collector/ops/merge-ops.js';
import { offsetEndpoint, streamsOf } from '../../../src/collector/pods.js';
import { classifySeq } from '../../../src/collector/sequence.js';
import { encodeSeq, parseLiveFrames, parseReplayFrames } from '../../../src/collector/wire/frames.js';

const k = (s: string): BlockKey => s.padStart(16, '0') as BlockKey;

describe('classifySeq', () => {
  it('tells next, gap, restart and replay overlap apart', () => {
    expect(classifySeq(null, 7)).toEqual({ kind: 'first' });
    expect(classifySeq(4, 5)).toEqual({ kind: 'next' });
    expect(classifySeq(4, 9)).toEqual({ kind: 'gap', expected: 5, missing: 4 });
    expect(classifySeq(4, 0)).toEqual({ kind: 'restart' });
    expect(classifySeq(4, 4)).toEqual({ kind: 'restart' });
    expect(classifySeq(4, 3, true)).toEqual({ kind: 'duplicate' });
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
  });
});
