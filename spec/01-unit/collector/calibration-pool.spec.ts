import { describe, expect, it } from 'vitest';
import {
  CalibrationPool,
  calibrationGroup,
  DecodeStepsPool,
} from '../../../src/collector/metrics/calibration-pool.js';
import { DEFAULT_CALIBRATION } from '../../../src/core/predictor.js';

const cal = (prefillMsPerToken: number, decodeStepMs: number) => ({
  ...DEFAULT_CALIBRATION,
  prefillMsPerToken,
  decodeStepMs,
});

describe('CalibrationPool: like pods share the median of their own estimates', () => {
  const g = calibrationGroup('qwen', 5888, 16);

  it('groups by model and KV geometry', () => {
    expect(g).toBe('qwen|5888|16');
    expect(calibrationGroup('qwen', null, null)).toBe('qwen|?|?');
    expect(calibrationGroup('qwen', 10240, 16)).not.toBe(g);
  });

  it('gives every member the per-coefficient median, so one stale pod does not stand out', () => {
    const pool = new CalibrationPool();
    pool.set('a#', g, cal(0.37, 99));
    pool.set('b#', g, cal(0.31, 69));
    // c was busy, then avoided: its estimate is stale and high.
    expect(pool.share('c#', g, cal(0.39, 165))).toEqual(cal(0.37, 99));
    // Two members: the mean of the two.
    pool.remove('c#');
    const two = pool.pooled(g)!;
    expect(two.prefillMsPerToken).toBeCloseTo(0.34, 12);
    expect(two.decodeStepMs).toBe(84);
  });

  it('lets a pod with no estimate of its own start from its peers, and keeps a lone pod its own', () => {
    const pool = new CalibrationPool();
    expect(pool.share('new#', g, null)).toBeNull();
    pool.set('a#', g, cal(0.4, 50));
    expect(pool.share('new#', g, null)).toEqual(cal(0.4, 50));
    const other = calibrationGroup('qwen', 10240, 16);
    expect(pool.share('h100#', other, cal(0.1, 20))).toEqual(cal(0.1, 20));
  });

  it('moves a member whose geometry changed (restarted with other settings) to its new group', () => {
    const pool = new CalibrationPool();
    pool.set('a#', g, cal(0.4, 50));
    pool.set('b#', g, cal(0.2, 30));
    const other = calibrationGroup('qwen', 10240, 16);
    pool.set('b#', other, cal(0.1, 20));
    expect(pool.pooled(g)).toEqual(cal(0.4, 50));
    expect(pool.pooled(other)).toEqual(cal(0.1, 20));
    pool.remove('a#');
    expect(pool.pooled(g)).toBeNull();
  });
  it('pools measured decode steps per field, the line from the members that have one', () => {
    const pool = new DecodeStepsPool();
    const steps = (stepMs: number, line: [number, number] | null) => ({
      contextTokens: stepMs * 1000,
      stepMs,
      intervals: 10,
      line: line && { baseMs: line[0], msPerContextToken: line[1] },
    });
    pool.set('a#', g, steps(50, [43, 0.00036]));
    pool.set('b#', g, steps(60, null));
    pool.set('c#', g, steps(70, [45, 0.0004]));
    pool.set('d#', g, null); // not measured yet
    expect(pool.pooled(g)).toEqual({
      contextTokens: 60_000,
      stepMs: 60,
      intervals: 30,
      line: { baseMs: 44, msPerContextToken: 0.00038 },
    });
    pool.remove('a#');
    pool.remove('c#');
    expect(pool.pooled(g)!.line).toBeNull();
    pool.remove('b#');
    expect(pool.pooled(g)).toBeNull();
    expect(pool.share('d#', g, steps(50, null))).toEqual(steps(50, null));
  });
});
