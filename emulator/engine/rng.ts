/**
 * Small seeded PRNG (sfc32, seeded through splitmix32) so that an engine run is reproducible for a seed.
 * Not for cryptography.
 */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  /** Seeds from any number of integers (e.g. engine seed and a request's arrival index). */
  constructor(...seeds: number[]) {
    let s = 0x9e3779b9;
    for (const x of seeds) s = mix32((s ^ (x >>> 0)) + Math.floor(x / 2 ** 32));
    const next = (): number => {
      s = (s + 0x9e3779b9) | 0;
      return mix32(s);
    };
    this.#a = next();
    this.#b = next();
    this.#c = next();
    this.#d = next();
    for (let i = 0; i < 12; i++) this.nextU32();
  }

  nextU32(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.nextU32() / 2 ** 32;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }
}

function mix32(x: number): number {
  let z = x | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
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
