import { describe, expect, it } from 'vitest';
import { acceptedPerUtcMinute, windowOf, type LiveMixedRecord } from '../../../bench/lib/mixed/live-mixed.js';

// bench:mixed-live counts the limited tenant's prompt tokens in the UTC minute its limiter admitted them in.
const MIN = 60_000;
const T0 = 29_000_000 * MIN; // a whole UTC minute

describe('windowOf: the minute a limiter response names', () => {
  it('reads the kinference limiter’s reset header, else Kong rate-limiting’s', () => {
    // 0.3 s into the minute, 60 s left (the limiter rounds up): the minute that started at T0.
    expect(windowOf({ 'x-ai-ratelimit-reset-60-prompt': '60' }, T0 + 300)).toBe(T0);
    // 59.7 s into it, 1 s left: still T0, though the response came late in it.
    expect(windowOf({ 'x-ai-ratelimit-reset-60-prompt': '1' }, T0 + 59_700)).toBe(T0);
    expect(windowOf({ 'ratelimit-reset': '30' }, T0 + MIN + 30_000)).toBe(T0 + MIN);
    expect(windowOf({}, T0)).toBeNull();
  });
});

describe('acceptedPerUtcMinute', () => {
  const rec = (admittedWindowMs: number | null, promptTokens: number): LiveMixedRecord =>
    ({ admittedWindowMs, promptTokens, tenant: 'free' }) as LiveMixedRecord;
  it('sums each whole minute of the measure window; refused and outside requests count nowhere', () => {
    const recs = [rec(T0, 500), rec(T0, 508), rec(T0 + MIN, 500), rec(null, 500), rec(T0 - MIN, 500)];
    expect(acceptedPerUtcMinute(recs, T0, 120)).toEqual([1008, 500]);
    // A measure window of 90 s has one whole minute.
    expect(acceptedPerUtcMinute(recs, T0, 90)).toEqual([1008]);
  });
  it('puts a request no limiter answered in the minute it was sent in', () => {
    expect(acceptedPerUtcMinute([rec(T0 + 59_999, 500), rec(T0 + MIN, 7)], T0, 120)).toEqual([500, 7]);
  });
});
