// PairTable: token-id pair → packed merge, in typed arrays (BPE looks one up per adjacent symbol).
/** A PairTable's contents: slot arrays of a power-of-two length. */
export interface PairTableParts {
  left: Int32Array;
  right: Int32Array;
  value: Float64Array;
  size: number;
}

/**
 * An open-addressing hash table from a pair of token ids to a packed merge (see merge.ts), in typed arrays:
 * BPE looks up a pair per adjacent symbol, and a Map keyed by `a * PACK + b` (a double, not a small
 * integer) costs several times more per lookup.
 */
export class PairTable {
  #left: Int32Array;
  #right: Int32Array;
  #value: Float64Array;
  #mask: number;
  #size = 0;

  /** Room for `capacity` pairs at a load factor of at most one half. */
  constructor(capacity: number) {
    let slots = 16;
    while (slots < capacity * 2) slots *= 2;
    this.#left = new Int32Array(slots).fill(-1);
    this.#right = new Int32Array(slots);
    this.#value = new Float64Array(slots);
    this.#mask = slots - 1;
  }

  get size(): number {
    return this.#size;
  }

  /** True when no more pairs fit (the caller clears or stops adding). */
  get full(): boolean {
    return this.#size * 2 >= this.#mask + 1;
  }

  #slot(a: number, b: number): number {
    let h = (Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca6b)) & this.#mask;
    while (this.#left[h] !== -1 && (this.#left[h] !== a || this.#right[h] !== b)) h = (h + 1) & this.#mask;
    return h;
  }

  /** The value stored for (a, b), or `absent`. */
  get(a: number, b: number, absent: number): number {
    const h = this.#slot(a, b);
    return this.#left[h] === -1 ? absent : this.#value[h]!;
  }

  /** Stores (a, b) → value unless present (the first value wins, as the lowest merge rank must). */
  add(a: number, b: number, value: number): void {
    const h = this.#slot(a, b);
    if (this.#left[h] !== -1) return;
    if (this.full) throw new RangeError('PairTable is full');
    this.#left[h] = a;
    this.#right[h] = b;
    this.#value[h] = value;
    this.#size++;
  }

  /** The table's arrays, to send to another thread (transferable) and rebuild there with fromParts. */
  parts(): PairTableParts {
    return { left: this.#left, right: this.#right, value: this.#value, size: this.#size };
  }

  /** A table over arrays made by parts() (in another thread): no copy, no rehash. */
  static fromParts(p: PairTableParts): PairTable {
    const t = new PairTable(0);
    t.#left = p.left;
    t.#right = p.right;
    t.#value = p.value;
    t.#mask = p.left.length - 1;
    t.#size = p.size;
    return t;
  }

  clear(): void {
    this.#left.fill(-1);
    this.#size = 0;
  }
}
