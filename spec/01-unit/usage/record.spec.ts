import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  TTFT_BUCKETS_MS,
  USAGE_FIELDS,
  hourOf,
  hourStartMs,
  ttftBucket,
  usageIncrements,
  type UsageEvent,
} from '../../../src/usage/index.js';

const event: UsageEvent = {
  atMs: 0,
  tenant: 't',
  serviceClass: 'c',
  model: 'm',
  shed: false,
  promptTokens: 10,
  cachedTokens: 4,
  output: { tokens: 3, exact: false, streamed: true },
  ttftMs: 120,
  cost: { cost: null, saving: null },
};

describe('usage record fields', () => {
  it('one field per TTFT bucket, and every TTFT lands in the first bucket at or above it', () => {
    for (const b of TTFT_BUCKETS_MS) expect(USAGE_FIELDS).toContain(`ttft_le_${b}`);
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e6, noNaN: true }), (ms) => {
        const f = ttftBucket(ms);
        const bound = f === 'ttft_le_inf' ? Infinity : Number(f.slice('ttft_le_'.length));
        expect(ms).toBeLessThanOrEqual(bound);
        const below = TTFT_BUCKETS_MS.filter((b) => b < bound);
        for (const b of below) expect(ms).toBeGreaterThan(b);
      }),
    );
  });

  it('UTC hours: the key of an instant, and back to its hour start', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4102444800000 }), (ms) => {
        const h = hourOf(ms);
        expect(h).toMatch(/^\d{10}$/);
        expect(hourStartMs(h)).toBeLessThanOrEqual(ms);
        expect(ms - hourStartMs(h)).toBeLessThan(3_600_000);
      }),
    );
  });

  it('an unpriced request counts as unpriced, never as cost 0; a shed one counts no tokens', () => {
    const inc = Object.fromEntries(usageIncrements(event));
    expect(inc).toMatchObject({ requests: 1, prompt_tokens: 10, cached_tokens: 4, unpriced: 1 });
    expect(inc).not.toHaveProperty('cost');
    expect(Object.fromEntries(usageIncrements({ ...event, shed: true }))).toEqual({ requests: 1, shed: 1 });
  });
});
