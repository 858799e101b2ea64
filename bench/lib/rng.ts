// The benchmark's seeded PRNG (sfc32 from one seed): exponential and Poisson draws, derived streams.
import { Sfc32, splitmixWords } from '../../harness/sfc32.js';

/** Largest mean Knuth's method draws at once: e^−30 ≈ 9e−14 is still a normal double with room to spare. */
const POISSON_CHUNK = 30;

/**
 * Seeded PRNG (sfc32 seeded through splitmix32 from one seed). Every random choice in the benchmark draws
 * from one of these, so a run is reproducible from its seed and two arms given the same seed see the same
 * workload.
 */
export class Rng extends Sfc32 {
  constructor(seed: number) {
    super(splitmixWords(seed >>> 0));
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.float();
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[this.int(items.length)]!;
  }

  /** Exponential with the given rate (events per unit). */
  exponential(rate: number): number {
    return -Math.log(1 - this.next()) / rate;
  }

  /**
   * Poisson with the given mean, exactly (no normal approximation). Knuth's multiplication method on chunks
   * of mean ≤ POISSON_CHUNK, summed: a sum of independent Poissons is Poisson with the summed mean, and the
   * chunking keeps e^−chunk far above the smallest double. Cost is about mean + chunks uniforms.
   */
  poisson(mean: number): number {
    if (!(mean >= 0) || !Number.isFinite(mean))
      throw new RangeError(`poisson mean must be finite and ≥ 0: ${mean}`);
    let k = 0;
    for (let left = mean; left > 0; left -= POISSON_CHUNK) {
      const limit = Math.exp(-Math.min(left, POISSON_CHUNK));
      // 1 − next() is in (0, 1]: a zero factor would end the product early.
      for (let p = 1 - this.next(); p > limit; p *= 1 - this.next()) k++;
    }
    return k;
  }

  /** An independent stream derived from this seed and a label (e.g. one per arm or trial). */
  static derive(seed: number, ...labels: (string | number)[]): Rng {
    let h = seed >>> 0;
    for (const label of labels) {
      const s = String(label);
      for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
      h = Math.imul(h ^ 0xff, 0x01000193) >>> 0;
    }
    return new Rng(h);
  }
}
