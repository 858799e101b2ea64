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
 * O(n log n): a linked list of symbols and a binary min-heap of candidate pairs ordered by (packed rank,
 * position), in typed arrays. A popped candidate is stale when either symbol has changed since it was pushed;
 * it is then skipped (a pair with the same two ids at the same place is the same candidate).
 */
export function mergeByHeap(input: readonly number[], lookup: PairLookup): number[] {
  const n = input.length;
  if (n < 2) return Array.from(input);
  const sym = Int32Array.from(input);
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  // Every merge pushes at most two candidates: n − 1 initial ones plus 2 per merge.
  const cap = 3 * n;
  const hRank = new Float64Array(cap);
  const hPos = new Int32Array(cap);
  const hLeft = new Int32Array(cap);
  const hRight = new Int32Array(cap);
  let size = 0;
  const less = (a: number, b: number): boolean =>
    hRank[a]! < hRank[b]! || (hRank[a] === hRank[b] && hPos[a]! < hPos[b]!);
  const swap = (a: number, b: number): void => {
    const r = hRank[a]!;
    hRank[a] = hRank[b]!;
    hRank[b] = r;
    const p = hPos[a]!;
    hPos[a] = hPos[b]!;
    hPos[b] = p;
    const l = hLeft[a]!;
    hLeft[a] = hLeft[b]!;
    hLeft[b] = l;
    const q = hRight[a]!;
    hRight[a] = hRight[b]!;
    hRight[b] = q;
  };
  const push = (pos: number): void => {
    const nx = next[pos]!;
    if (nx < 0) return;
    const packed = lookup(sym[pos]!, sym[nx]!);
    if (packed < 0) return;
    let c = size++;
    hRank[c] = packed;
    hPos[c] = pos;
    hLeft[c] = sym[pos]!;
    hRight[c] = sym[nx]!;
    while (c > 0) {
      const p = (c - 1) >> 1;
      if (!less(c, p)) break;
      swap(c, p);
      c = p;
    }
  };
  const popTop = (): void => {
    size--;
    if (size > 0) swap(0, size);
    let p = 0;
    for (;;) {
      const l = 2 * p + 1;
      const r = l + 1;
      let m = p;
      if (l < size && less(l, m)) m = l;
      if (r < size && less(r, m)) m = r;
      if (m === p) break;
      swap(p, m);
      p = m;
    }
  };
  for (let i = 0; i + 1 < n; i++) push(i);
  while (size > 0) {
    const packed = hRank[0]!;
    const pos = hPos[0]!;
    const left = hLeft[0]!;
    const right = hRight[0]!;
    popTop();
    const nx = next[pos]!;
    if (sym[pos] !== left || nx < 0 || sym[nx] !== right) continue;
    sym[pos] = packed % PACK;
    sym[nx] = -1;
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
