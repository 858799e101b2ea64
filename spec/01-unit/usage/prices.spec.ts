import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Price } from '../../../src/policies/index.js';
import { estimateCost, priceFor, tokenPrices } from '../../../src/usage/index.js';

const price = (p: Partial<Price>): Price => ({ gpus_per_pod: 1, ...p });

describe('prices: per-token prices from the table or from a GPU-hour price', () => {
  it("picks the model's own entry, else `*`, else none", () => {
    const table = { a: price({ input_per_million: 1 }), '*': price({ input_per_million: 2 }) };
    expect(priceFor(table, 'a')?.input_per_million).toBe(1);
    expect(priceFor(table, 'b')?.input_per_million).toBe(2);
    expect(priceFor({ a: price({ input_per_million: 1 }) }, 'b')).toBeNull();
    expect(priceFor(undefined, 'a')).toBeNull();
  });

  it('derives prefill and decode prices from gpu_hour × gpus_per_pod and the pod speeds', () => {
    const p = tokenPrices(price({ gpu_hour: 3.6, gpus_per_pod: 2 }), {
      prefillMsPerToken: 0.5,
      decodeStepMs: 30,
      running: 9,
    });
    // 3.6 × 2 / 3.6e6 = 2e-6 per GPU-ms of the pod.
    expect(p.input).toBeCloseTo(2e-6 * 0.5, 15);
    expect(p.output).toBeCloseTo((2e-6 * 30) / 10, 15);
    expect(p.cachedInput).toBe(0);
    expect(p.source).toEqual({ input: 'gpu_hour', cachedInput: 'gpu_hour', output: 'gpu_hour' });
  });

  it('a per-million price given wins over gpu_hour; without speeds, gpu_hour prices nothing', () => {
    const speeds = { prefillMsPerToken: 1, decodeStepMs: 10, running: 0 };
    const p = tokenPrices(price({ gpu_hour: 2, output_per_million: 8 }), speeds);
    expect(p.output).toBe(8e-6);
    expect(p.source.output).toBe('table');
    const none = tokenPrices(price({ gpu_hour: 2 }), null);
    expect([none.input, none.cachedInput, none.output]).toEqual([null, null, null]);
  });
});

describe('estimateCost: cached prompt tokens are their own token type; unknown is null, never 0', () => {
  const full = tokenPrices(
    price({ input_per_million: 3, cached_input_per_million: 0.3, output_per_million: 15 }),
    null,
  );

  it('prices uncached, cached and output tokens each at their own price', () => {
    const c = estimateCost({ promptTokens: 1000, cachedTokens: 600, outputTokens: 100 }, full);
    expect(c.cost).toBeCloseTo(400 * 3e-6 + 600 * 0.3e-6 + 100 * 15e-6, 12);
    expect(c.saving).toBeCloseTo(600 * (3e-6 - 0.3e-6), 12);
  });

  it('a count that needs a missing price makes the cost unknown; a zero count needs none', () => {
    const noCached = tokenPrices(price({ input_per_million: 3, output_per_million: 15 }), null);
    expect(estimateCost({ promptTokens: 10, cachedTokens: 4, outputTokens: 1 }, noCached)).toEqual({
      cost: null,
      saving: null,
    });
    const c = estimateCost({ promptTokens: 10, cachedTokens: 0, outputTokens: 1 }, noCached);
    expect(c.cost).toBeCloseTo(10 * 3e-6 + 15e-6, 12);
    expect(c.saving).toBe(0);
  });

  it('property: cost = Σ count × price, never negative, and more cache never costs more when cache is cheaper', () => {
    fc.assert(
      fc.property(
        fc.nat(100000),
        fc.nat(100000),
        fc.nat(10000),
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        (prompt, cached, output, inM, cachedFrac, outM) => {
          const prices = tokenPrices(
            price({
              input_per_million: inM,
              cached_input_per_million: (inM * Math.min(cachedFrac, 100)) / 100,
              output_per_million: outM,
            }),
            null,
          );
          const a = estimateCost(
            { promptTokens: prompt, cachedTokens: cached, outputTokens: output },
            prices,
          );
          const c = Math.min(cached, prompt);
          const expected = (prompt - c) * prices.input! + c * prices.cachedInput! + output * prices.output!;
          expect(a.cost).toBeCloseTo(expected, 9);
          expect(a.cost!).toBeGreaterThanOrEqual(0);
          const more = estimateCost(
            { promptTokens: prompt, cachedTokens: Math.min(prompt, c + 16), outputTokens: output },
            prices,
          );
          expect(more.cost!).toBeLessThanOrEqual(a.cost! + 1e-12);
        },
      ),
    );
  });
});
