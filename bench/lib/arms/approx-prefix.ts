// The "approximate prefix" arm (GIE / llm-d): routing on the router's own past decisions, no engine events.
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import type { BlockKey } from '../../../src/core/types.js';
import type { Arm, PodView } from './types.js';

/**
 * GIE / llm-d "approximate prefix" routing (docs/benchmark.md "The arms"): the router remembers ITS OWN past
 * decisions (no engine events) as a per-pod LRU of prefix-block hashes, sized from the pod's KV capacity
 * (autoTune from num_gpu_blocks), with blocks of at least 64 tokens. Scoring is GIE's default profile:
 * prefix 3 × matchedBlocks/totalBlocks + queue 2 × min-max-normalised waiting + kv-util 2 × (1 − kv%),
 * from scraped metrics; the highest total wins (ties: fewest in flight, then pod order).
 */
export function approxPrefixArm(opts: { model: string; blockTokens: number; capacityBlocks: number }): Arm {
  const lru = new Map<string, Map<BlockKey, true>>();
  const seed = keySeed({ model: opts.model });
  const of = (id: string): Map<BlockKey, true> => {
    let m = lru.get(id);
    if (!m) lru.set(id, (m = new Map()));
    return m;
  };
  const queueScores = (pods: readonly PodView[]): number[] => {
    const q = pods.map((p) => p.waiting ?? 0);
    const min = Math.min(...q);
    const max = Math.max(...q);
    return q.map((x) => (max === min ? 1 : (max - x) / (max - min)));
  };
  return {
    name: 'approx-prefix',
    choose: (req, pods) => {
      const keys = blockKeys(req.promptTokenIds, opts.blockTokens, seed);
      const qs = queueScores(pods);
      let best = -1;
      let bestScore = Number.NEGATIVE_INFINITY;
      pods.forEach((p, i) => {
        const m = of(p.id);
        let matched = 0;
        while (matched < keys.length && m.has(keys[matched]!)) matched++;
        const prefix = keys.length ? matched / keys.length : 0;
        const score = 3 * prefix + 2 * qs[i]! + 2 * (1 - (p.kvUsage ?? 0));
        if (
          score > bestScore + 1e-12 ||
          (Math.abs(score - bestScore) <= 1e-12 && p.inFlight < pods[best]!.inFlight)
        ) {
          best = i;
          bestScore = score;
        }
      });
      const chosen = pods[best]!.id;
      // Remember the decision: the chosen pod will hold these blocks (LRU order refreshed).
      const m = of(chosen);
      for (const k of keys) {
        m.delete(k);
        m.set(k, true);
      }
      while (m.size > opts.capacityBlocks) m.delete(m.keys().next().value!);
      return { podId: chosen };
    },
  };
}
