// A small LRU map bounded by entries' estimated bytes, for whole-prompt memos (render, tokenize).

/** LRU over a Map (insertion order), evicting the oldest while over `maxBytes`. An entry over the cap is skipped. */
export class BytesLru<V> {
  readonly #map = new Map<string, { value: V; bytes: number }>();
  #bytes = 0;
  constructor(
    readonly maxBytes: number,
    readonly maxEntryBytes: number = maxBytes,
  ) {}

  get(key: string): V | undefined {
    const e = this.#map.get(key);
    if (e === undefined) return undefined;
    this.#map.delete(key);
    this.#map.set(key, e);
    return e.value;
  }

  set(key: string, value: V, bytes: number): void {
    if (bytes > this.maxEntryBytes || bytes > this.maxBytes) return;
    const old = this.#map.get(key);
    if (old !== undefined) {
      this.#map.delete(key);
      this.#bytes -= old.bytes;
    }
    this.#map.set(key, { value, bytes });
    this.#bytes += bytes;
    for (const [k, e] of this.#map) {
      if (this.#bytes <= this.maxBytes) break;
      this.#map.delete(k);
      this.#bytes -= e.bytes;
    }
  }

  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#map.size;
  }
}
