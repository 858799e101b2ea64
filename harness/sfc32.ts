/**
 * sfc32, a small fast seeded PRNG (not for cryptography), and the splitmix-style mixer both the benchmark
 * and the emulator seed it with. Their seeding differs (one seed vs several), so each keeps its own
 * constructor; the generator itself lives here once.
 */
export function mix32(x: number): number {
  let z = x | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** The golden-ratio increment of splitmix32. */
export const GOLDEN32 = 0x9e3779b9;

/** Four state words from a splitmix32 sequence starting after `s`. */
export function splitmixWords(s: number): [number, number, number, number] {
  const words: number[] = [];
  for (let i = 0; i < 4; i++) {
    s = (s + GOLDEN32) | 0;
    words.push(mix32(s));
  }
  return words as [number, number, number, number];
}

export class Sfc32 {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor([a, b, c, d]: readonly [number, number, number, number]) {
    this.#a = a;
    this.#b = b;
    this.#c = c;
    this.#d = d;
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
