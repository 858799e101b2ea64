// The emulated engine's seeded PRNG (sfc32 from several integers) and a string hash to seed from names.
import { GOLDEN32, mix32, Sfc32, splitmixWords } from '../../harness/sfc32.js';

/**
 * Small seeded PRNG (sfc32, seeded through splitmix32 from several integers) so that an engine run is
 * reproducible for a seed. Not for cryptography.
 */
export class Rng extends Sfc32 {
  /** Seeds from any number of integers (e.g. engine seed and a request's arrival index). */
  constructor(...seeds: number[]) {
    let s = GOLDEN32;
    for (const x of seeds) s = mix32((s ^ (x >>> 0)) + Math.floor(x / 2 ** 32));
    super(splitmixWords(s));
  }
}

/** 32-bit FNV-1a of a string, to seed from names (pod ids). */
export function hashString32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
