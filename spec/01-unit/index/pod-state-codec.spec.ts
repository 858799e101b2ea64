import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PodState } from '../../../src/core/types.js';
import { defaultPodState } from '../../../src/index/index.js';
import {
  decodePodState,
  encodePodState,
  escapeStateValue,
  parseStateRecord,
} from '../../../src/index/pod-state-codec.js';

const ref = { model: 'm', podId: 'pod-a' };
const dbl = fc.double({ noNaN: true, noDefaultInfinity: true }).filter((v) => !Object.is(v, -0));

const state: fc.Arbitrary<PodState> = fc.record({
  podId: fc.constant('pod-a'),
  model: fc.constant('m'),
  address: fc.string({ unit: 'grapheme' }),
  healthy: fc.boolean(),
  running: fc.nat(),
  waiting: fc.nat(),
  kvUsage: dbl,
  kvCapacityTokens: fc.nat(),
  meanQueuedPrefillTokens: dbl,
  maxModelLen: fc.nat(),
  calibration: fc.option(
    fc.record({
      overheadMs: dbl,
      prefillMsPerToken: dbl,
      attentionMsPerToken2: dbl,
      cpuLoadMsPerToken: dbl,
      decodeStepMs: dbl,
      maxBatchedTokens: fc.nat(),
    }),
  ),
  decodeSteps: fc.option(
    fc.record({
      contextTokens: dbl,
      stepMs: dbl,
      intervals: fc.nat(),
      line: fc.option(fc.record({ baseMs: dbl, msPerContextToken: dbl })),
    }),
  ),
  lastEventAtMs: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  lastScrapeAtMs: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  resyncing: fc.boolean(),
  partialSinceMs: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
});

describe('pod state codec', () => {
  it('round-trips every state exactly (doubles included)', () => {
    fc.assert(
      fc.property(state, (s) => {
        const { podId, model: _m, ...patch } = s;
        expect(decodePodState(ref, encodePodState(podId, patch))).toEqual(s);
      }),
    );
  });

  it('writes id first, then only the fields given', () => {
    expect(encodePodState('pod-a', {})).toEqual(['id', 'pod-a']);
    expect(encodePodState('pod-a', { waiting: 4, calibration: null, running: undefined })).toEqual([
      'id',
      'pod-a',
      'waiting',
      '4',
      'calibration',
      '',
    ]);
  });

  it('fills absent fields with defaults and ignores fields it does not know', () => {
    expect(decodePodState(ref, ['id', 'pod-a', 'running', '5', 'from_a_newer_version', 'x'])).toEqual({
      ...defaultPodState(ref),
      running: 5,
    });
  });

  it('rejects a malformed calibration or field list with KINF_ERR_INDEX_REPLY', () => {
    for (const flat of [['calibration', '{nope'], ['calibration', '[1,2]'], ['running']])
      expect(() => decodePodState(ref, flat)).toThrow(
        expect.objectContaining({ code: 'KINF_ERR_INDEX_REPLY' }),
      );
  });

  it('stores any value in a record line: escaped on write, restored on read', () => {
    const field = fc.stringMatching(/^[a-z_]{1,12}$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(field, fc.string({ unit: 'binary' }))), (pairs) => {
        const record = pairs.map(([f, v]) => `${f}=${escapeStateValue(v)}\n`).join('');
        expect(parseStateRecord(record)).toEqual(pairs.flat());
      }),
    );
    expect(escapeStateValue('a\\b\nc')).toBe('a\\\\b\\nc');
    expect(parseStateRecord('address=10.0.0.1:8000\ncalibration=\n')).toEqual([
      'address',
      '10.0.0.1:8000',
      'calibration',
      '',
    ]);
  });
});
