/**
 * Byte-pair merging over token ids. A word starts as one id per byte; the adjacent pair with the lowest merge
 * rank is merged first, the leftmost on ties, until no pair can merge: what HF `tokenizers` (BPE `merge_word`)
 * and tiktoken (`byte_pair_merge`) both do.
 */

/**
 * Looks up a pair: `rank * PACK + mergedId`, or -1 when the pair does not merge. Packing rank and id in one
 * number lets a comparison of packed values order pairs by rank.
 */
export type PairLookup = (left: number, right: number) => number;

/** Ids and ranks stay below 2^21 (vocabularies up to ~2M); packed values stay exact doubles. */
export const PACK = 2 ** 21;

/** Words up to this many bytes use the quadratic scan; longer ones the heap (bounded CPU on huge words). */
const SCAN_MAX = 48;

export function mergeWord(ids: number[], lookup: PairLookup): number[] {
  return ids.length <= SCAN_MAX ? mergeByScan(ids, lookup) : mergeByHeap(ids, lookup);
}

/** O(n²): fastest for the short words that make up almost all text. Mutates and returns `ids`. */
export function mergeByScan(ids: number[], lookup: PairLookup): number[] {
  if (ids.length < 2) return ids;
  const ranks: number[] = new Array(ids.length);
  for (let i = 0; i + 1 < ids.length; i++) ranks[i] = lookup(ids[i]!, ids[i + 1]!);
  ranks[ids.length - 1] = -1;
  for (;;) {
    let best = -1;
    let at = -1;
    for (let i = 0; i + 1 < ids.length; i++) {
      const r = ranks[i]!;
      if (r >= 0 && (best < 0 || r < best)) {
        best = r;
        at = i;
      }
    }
    if (at < 0) return ids;
    ids[at] = best % PACK;
    ids.splice(at + 1, 1);
    ranks.splice(at + 1, 1);
    ranks[at] = at + 1 < ids.length ? lookup(ids[at]!, ids[at + 1]!) : -1;
    if (at > 0) ranks[at - 1] = lookup(ids[at - 1]!, ids[at]!);
  }
}

/**
 * O(n log n): a linked list of symbols and a min-heap of candidate pairs ordered by (packed rank, position).
 * A popped candidate is stale when either symbol has merged since it was pushed; it is then skipped.
 */
export function mergeByHeap(input: readonly number[], lookup: PairLookup): number[] {
  const n = input.length;
  if (n < 2) return Array.from(input);
  const sym = Array.from(input);
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  const alive = new Uint8Array(n).fill(1);
  for (let i = 0; i < n; i++) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  // Heap of [packed, pos, leftId, rightId] flattened.
  const heap: number[] = [];
  const less = (a: number, b: number): boolean =>
    heap[a]! < heap[b]! || (heap[a] === heap[b] && heap[a + 1]! < heap[b + 1]!);
  const swap = (a: number, b: number): void => {
    for (let k = 0; k < 4; k++) {
      const t = heap[a + k]!;
      heap[a + k] = heap[b + k]!;
      heap[b + k] = t;
    }
  };
  const push = (pos: number): void => {
    const nx = next[pos]!;
    if (nx < 0) return;
    const packed = lookup(sym[pos]!, sym[nx]!);
    if (packed < 0) return;
    heap.push(packed, pos, sym[pos]!, sym[nx]!);
    let c = heap.length - 4;
    while (c > 0) {
      const p = ((((c >> 2) - 1) >> 1) << 2) >>> 0;
      if (!less(c, p)) break;
      swap(c, p);
      c = p;
    }
  };
  const pop = (): void => {
    const last = heap.length - 4;
    if (last > 0) swap(0, last);
    heap.length = last;
    let p = 0;
    for (;;) {
      const l = (((p >> 2) * 2 + 1) << 2) >>> 0;
      const r = l + 4;
      let m = p;
      if (l < heap.length && less(l, m)) m = l;
      if (r < heap.length && less(r, m)) m = r;
      if (m === p) break;
      swap(p, m);
      p = m;
    }
  };
  for (let i = 0; i + 1 < n; i++) push(i);
  while (heap.length > 0) {
    const packed = heap[0]!;
    const pos = heap[1]!;
    const left = heap[2]!;
    const right = heap[3]!;
    pop();
    const nx = next[pos]!;
    if (!alive[pos] || nx < 0 || sym[pos] !== left || sym[nx] !== right) continue;
    sym[pos] = packed % PACK;
    alive[nx] = 0;
    const after = next[nx]!;
    next[pos] = after;
    if (after >= 0) prev[after] = pos;
    if (prev[pos]! >= 0) push(prev[pos]!);
    push(pos);
  }
  const out: number[] = [];
  for (let i = 0; i >= 0; i = next[i]!) out.push(sym[i]!);
  return out;
}
