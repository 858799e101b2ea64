import { Sfc32, splitmixWords } from '../../src/util/sfc32.js';

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
