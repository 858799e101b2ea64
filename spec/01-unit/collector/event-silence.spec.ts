import { describe, expect, it } from 'vitest';
import { EventSilenceWatch, computedPromptTokens } from '../../../src/collector/event-silence.js';
import type { EngineMetrics } from '../../../src/collector/metrics/vllm-metrics.js';

const uncached = (tokens: number) => ({ source: 'uncached' as const, tokens });

describe('EventSilenceWatch: a stream silent while its engine computes prompts', () => {
  it('warns once the engine computed enough without a frame, then only every repeatMs', () => {
    const w = new EventSilenceWatch(1000, 60_000, 0);
    expect(w.observe(0, uncached(500), 0)).toBeNull(); // baseline
    expect(w.observe(1000, uncached(1400), 0)).toBeNull(); // 900 < 1000
    expect(w.computedSinceFrame(uncached(1500))).toBe(1000);
    expect(w.observe(2000, uncached(1500), 0)).toBe('silent');
    expect(w.observe(3000, uncached(9000), 0)).toBeNull(); // said already
    expect(w.observe(62_000, uncached(9500), 0)).toBe('silent'); // repeated rarely
  });

  it('stays quiet while frames arrive, and says so when they start after a warning', () => {
    const w = new EventSilenceWatch(1000, 60_000, 0);
    w.observe(0, uncached(0), 0);
    expect(w.observe(1000, uncached(5000), 3)).toBeNull(); // frames came: re-baselined
    expect(w.observe(2000, uncached(5500), 3)).toBeNull();
    expect(w.observe(3000, uncached(6000), 3)).toBe('silent'); // silent again since the last frame
    expect(w.observe(4000, uncached(6100), 4)).toBe('heard');
    expect(w.observe(5000, uncached(6200), 5)).toBeNull();
  });

  it('an idle engine, a counter that goes back (restart) or changes source is not silence', () => {
    const w = new EventSilenceWatch(1000, 60_000, 0);
    w.observe(0, uncached(10_000), 0);
    expect(w.observe(1000, uncached(10_000), 0)).toBeNull();
    expect(w.observe(2000, uncached(50), 0)).toBeNull(); // restarted: new baseline 50
    expect(w.observe(3000, { source: 'prompt', tokens: 5000 }, 0)).toBeNull(); // new baseline
    expect(w.observe(4000, null, 0)).toBeNull();
    expect(w.observe(5000, uncached(900), 0)).toBeNull(); // baseline again
    expect(w.observe(6000, uncached(1900), 0)).toBe('silent');
  });

  it('waits graceMs with the tokens counted and no frame: vLLM counts a prompt a step before its first event', () => {
    const w = new EventSilenceWatch(1000, 60_000, 5000);
    w.observe(0, uncached(0), 0);
    expect(w.observe(1000, uncached(16_000), 0)).toBeNull(); // a long prompt scheduled, its step not done
    expect(w.observe(1500, uncached(16_000), 1)).toBeNull(); // its first batch: heard, nothing to say
    expect(w.observe(2000, uncached(40_000), 1)).toBeNull();
    expect(w.observe(6999, uncached(40_000), 1)).toBeNull(); // 4,999 ms without a frame
    expect(w.observe(7000, uncached(41_000), 1)).toBe('silent');
  });

  it('reads uncached prompt tokens from prefix-cache queries − hits, else prompt tokens', () => {
    const m = { prefixQueries: 300, prefixHits: 100, promptTokens: 999 } as EngineMetrics;
    expect(computedPromptTokens(m)).toEqual({ source: 'uncached', tokens: 200 });
    expect(computedPromptTokens({ ...m, prefixHits: null })).toEqual({ source: 'prompt', tokens: 999 });
    expect(computedPromptTokens({ ...m, prefixHits: null, promptTokens: null })).toBeNull();
    expect(computedPromptTokens(null)).toBeNull();
  });
});
