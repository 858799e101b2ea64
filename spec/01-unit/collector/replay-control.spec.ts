import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  newReplayControlStats,
  ReplayControl,
  type ReplayLimits,
} from '../../../src/collector/replay-control.js';

const LIMITS: ReplayLimits = {
  minIntervalMs: 1000,
  burst: 2,
  windowBudget: 4,
  windowMs: 60_000,
  maxBatches: 10,
  maxBytes: 1000,
};

describe('replay control: coalesced, rate-limited (issue #36 replay storms)', () => {
  beforeEach(() => void vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => void vi.useRealTimers());

  const make = () => {
    const fired: string[] = [];
    const stats = newReplayControlStats();
    const c = new ReplayControl<string>(
      stats,
      (k) => fired.push(k),
      (a, b) => (a === 'strong' || b === 'strong' ? 'strong' : a),
      LIMITS,
    );
    return { c, fired, stats };
  };

  it('a burst runs at once; past it, one request is held back and every later one joins it', () => {
    const { c, fired, stats } = make();
    const now = Date.now();
    expect(c.request('a', now)).toBe('run');
    expect(c.request('a', now)).toBe('run');
    expect(c.request('a', now)).toBe('interval');
    for (let i = 0; i < 300; i++) expect(c.request(i === 150 ? 'strong' : 'a', now)).toBe('coalesced');
    expect(stats).toEqual({
      requested: 303,
      coalesced: 300,
      refused: { interval: 1, budget: 0, bounded: 0, cut_short: 0, unanswered: 0 },
    });
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(999);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    // One replay for the 301 held back, of the strongest kind among them.
    expect(fired).toEqual(['strong']);
    expect(c.pending).toBeNull();
  });

  it('a window budget bounds a stream that keeps asking, one interval apart', () => {
    const { c, fired, stats } = make();
    let runs = 0;
    for (let t = 0; t < 60_000; t += 1000) if (c.request('a', Date.now()) === 'run') runs++;
    // Not advancing the clock: the burst only.
    expect(runs).toBe(2);
    c.stop();
    // Spread over a minute, one per second: the budget (4 per minute) is what stops them.
    const d = make();
    let ran = 0;
    for (let i = 0; i < 60; i++) {
      if (d.c.request('a', Date.now()) === 'run') ran++;
      vi.advanceTimersByTime(1000);
    }
    expect(ran + d.fired.length).toBeLessThanOrEqual(LIMITS.windowBudget + 1);
    expect(d.stats.refused.budget).toBeGreaterThan(0);
    d.c.stop();
    expect(fired).toEqual([]);
    expect(stats.requested).toBe(60);
  });

  it('a replay stopped at its bounds asks for its rest like any other request', () => {
    const { c, fired, stats } = make();
    const now = Date.now();
    expect(c.request('a', now)).toBe('run');
    expect(c.request('a', now)).toBe('run');
    c.bounded('rest', now);
    expect(stats.refused.bounded).toBe(1);
    expect(c.pending).toBe('rest');
    vi.advanceTimersByTime(1000);
    expect(fired).toEqual(['rest']);
    // With a replay still allowed, the rest still runs: through the timer, at once.
    vi.advanceTimersByTime(5000);
    c.bounded('more', Date.now());
    vi.advanceTimersByTime(0);
    expect(fired).toEqual(['rest', 'more']);
  });

  it('an unanswered replay is asked again no sooner than its delay, even when a replay is allowed at once', () => {
    const { c, fired, stats } = make();
    c.bounded('again', Date.now(), 'unanswered', 5000);
    expect(stats.refused.unanswered).toBe(1);
    vi.advanceTimersByTime(4999);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(['again']);
  });

  it('stop() forgets what was held back', () => {
    const { c, fired } = make();
    const now = Date.now();
    c.request('a', now);
    c.request('a', now);
    c.request('a', now);
    c.stop();
    vi.advanceTimersByTime(10_000);
    expect(fired).toEqual([]);
  });

  it("a held-back request is checked against the owner's clock when its timer fires, not Date.now", () => {
    let t = 100; // the stream's clock, far behind the (fake) Date.now
    const fired: string[] = [];
    const c = new ReplayControl<string>(
      newReplayControlStats(),
      (k) => fired.push(k),
      (a) => a,
      LIMITS,
      () => t,
    );
    expect(c.request('a', t)).toBe('run');
    expect(c.request('a', t)).toBe('run');
    expect(c.request('a', t)).toBe('interval');
    // The timer fires, but on the owner's clock no time has passed: it waits again.
    vi.advanceTimersByTime(1000);
    expect(fired).toEqual([]);
    t += 1000;
    vi.advanceTimersByTime(1000);
    expect(fired).toEqual(['a']);
  });
});
