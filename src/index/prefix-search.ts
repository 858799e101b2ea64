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
 */
export function tierPrefixes(count: number, rankAt: TierRankAt): PrefixBlocks {
  const at = (t: number) => (i: number) => {
    const r = rankAt(i);
    return r !== undefined && r <= t;
  };
  const gpu = gallopPrefix(count, at(0));
  const cpu = Math.max(gpu, gallopPrefix(count, at(1)));
  const storage = Math.max(cpu, gallopPrefix(count, at(2)));
  return { GPU: gpu, CPU: cpu, STORAGE: storage };
}
