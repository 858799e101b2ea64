// The latency-EWMA arm: Kong's `latency` balancer algorithm (EWMA of response time, decayed with time).
import type { Arm } from './types.js';

/** Kong kong/runloop/balancer/latency.lua: DECAY_TIME = 10 s. */
export const EWMA_DECAY_S = 10;

/**
 * Kong's `latency` algorithm (kong/runloop/balancer/latency.lua, Kong 3.x): per target an EWMA of
 * connect + upstream response time (the whole streamed response, not TTFT), decayed with time
 * (weight = exp(−Δt/10 s)), updated in the log phase. getPeer compares candidates' decayed EWMA and takes
 * the lowest. Its "power of two choices" set is grown back to every address when there are 3+ targets
 * (Kong issue #14961), so in released Kong it is a full scan; `pickSetSize` = 2 models the fixed version.
 * New targets start at the mean EWMA (slow start), here 0 for all at the start.
 */
export function latencyEwmaArm(opts: { pickSetSize?: number } = {}): Arm {
  const ewma = new Map<string, number>();
  const touched = new Map<string, number>();
  const decayed = (id: string, rttS: number, nowS: number): number => {
    const e = ewma.get(id) ?? 0;
    const last = touched.get(id) ?? 0;
    const w = Math.exp(-Math.max(0, nowS - last) / EWMA_DECAY_S);
    return e * w + rttS * (1 - w);
  };
  return {
    name: 'latency',
    choose: (_r, pods, nowMs) => {
      const k = opts.pickSetSize ?? pods.length;
      // Kong walks its address table in a fixed order and scores the first k entries.
      let best = pods[0]!;
      let bestScore = decayed(best.id, 0, nowMs / 1000);
      for (let i = 1; i < Math.min(k, pods.length); i++) {
        const s = decayed(pods[i]!.id, 0, nowMs / 1000);
        if (s < bestScore) {
          best = pods[i]!;
          bestScore = s;
        }
      }
      return { podId: best.id };
    },
    onComplete: (d, _r, nowMs, responseMs) => {
      const nowS = nowMs / 1000;
      ewma.set(d.podId, decayed(d.podId, responseMs / 1000, nowS));
      touched.set(d.podId, nowS);
    },
  };
}
