// The longest-cached-prefix search per tier, shared by MemoryKvIndex and mirrored in the Lua lookup.
import type { PrefixBlocks } from '../core/types.js';

/**
 * The chain search of the KvIndex contract, shared by MemoryKvIndex and mirrored line by line in the Lua
 * lookup script (src/index/lua/lookup.ts), so both answer identically on every input.
 *
 * Gallop: probe block n−1 for n = 1, 2, 4, … (the last probe is capped at block count−1) until a miss;
 * then binary-search between the last hit and the first miss. O(log n) probes; exact when the held blocks
 * form a prefix (vLLM evicts tail blocks first), an estimate otherwise.
 */
export function gallopPrefix(count: number, held: (block: number) => boolean): number {
  if (count <= 0) return 0;
  let lo = 0; // blocks [0, lo) are taken as held
  let hi: number; // the prefix is at most hi
  for (let n = 1; ; n *= 2) {
    const m = Math.min(n, count);
    if (!held(m - 1)) {
      hi = m - 1;
      break;
    }
    lo = m;
    if (m === count) return count;
  }
  while (lo < hi) {
    const mid = lo + Math.ceil((hi - lo) / 2); // in (lo, hi]
    if (held(mid - 1)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Fastest tier holding a block for a pod: 0 GPU, 1 CPU, 2 STORAGE; undefined when not held. */
export type TierRankAt = (block: number) => number | undefined;

/**
 * Per-tier prefixes for one pod. Tier t counts blocks held in tier t or faster; each tier is searched on
 * its own and then clamped upward (GPU ≤ CPU ≤ STORAGE), since on a non-prefix-closed set the searches of
 * nested predicates need not be ordered.
 *
 * A slower tier is searched only if the previous search met a block of that tier on its path: otherwise
 * both predicates agree on every probe, so the search would retrace the same path to the same answer.
 * (The Lua lookup does the same to save work; here it also keeps the two implementations in step.)
 */
export function tierPrefixes(count: number, rankAt: TierRankAt): PrefixBlocks {
  let worst = 0;
  const search = (t: number): number => {
    worst = 0;
    return gallopPrefix(count, (i) => {
      const r = rankAt(i);
      if (r === undefined) return false;
      if (r > worst) worst = r;
      return r <= t;
    });
  };
  const gpu = search(0);
  let cpu = gpu;
  if (worst >= 1) cpu = search(1);
  const storage = worst >= 2 ? search(2) : cpu;
  const c = Math.max(gpu, cpu);
  return { GPU: gpu, CPU: c, STORAGE: Math.max(c, storage) };
}
