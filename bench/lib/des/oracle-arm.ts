// The oracle arm: each request to the pod with the lowest exact TTFT, from the engines' true state.
import { RequestBlockHasher } from '../../../emulator/engine/block-hash.js';
import { capLongPrefill } from '../../../emulator/engine/engine.js';
import { stepCost } from '../../../emulator/engine/step-time.js';
import type { ScheduledWork } from '../../../emulator/engine/types.js';
import type { Arm, ArmDecision } from '../arms/types.js';
import type { SimPod } from './pod.js';

interface Work {
  remainingPrefill: number;
  context: number;
  remainingOut: number;
  probe: boolean;
}

/**
 * TTFT of a new request on a pod, from the engine's EXACT state: its real prefix cache (the engine's own
 * block hashes of this prompt against the blocks it holds) and every queued and running request's exact
 * progress, run forward through the scheduler's rules (running first, chunked prefill in the token budget,
 * FCFS admission within max_num_seqs and free blocks, long_prefill_token_threshold) with the engine's own
 * step-cost function. It ignores future arrivals and preemption, so it is the best a router could know, not a
 * clairvoyant schedule. It starts from the last finished step: the step in flight is run again, and the new
 * request may join it where budget is left (with long_prefill_token_threshold, optimistic by that step).
 */
export function exactTtftMs(
  pod: SimPod,
  promptIds: readonly number[],
  maxTokens: number,
  overheadMs: number,
): number {
  const eng = pod.engine;
  const bs = eng.blockSize;
  const snap = eng.snapshot();
  const cached = (hashes: readonly string[], promptTokens: number): number => {
    let n = 0;
    while (n < hashes.length && snap.cachedHashes.has(hashes[n] as never)) n++;
    return Math.min(n * bs, Math.floor((promptTokens - 1) / bs) * bs);
  };
  const hasher = new RequestBlockHasher(eng.noneHash, bs, null, null);
  hasher.update([...promptIds]);
  const probeCached = cached(hasher.hashes, promptIds.length);

  const running: Work[] = [];
  const waiting: Work[] = [];
  for (const id of snap.running) {
    const e = pod.ledger.get(id);
    if (!e) continue;
    const total = e.promptTokens + e.outputs;
    running.push({
      remainingPrefill: Math.max(0, total - e.computed - (e.outputs > 0 ? 1 : 0)),
      context: e.computed,
      remainingOut: Math.max(0, e.maxTokens - e.outputs),
      probe: false,
    });
  }
  for (const id of snap.waiting) {
    const e = pod.ledger.get(id);
    if (!e) continue;
    const c = e.blockHashes ? cached(e.blockHashes, e.promptTokens) : 0;
    waiting.push({
      remainingPrefill: e.promptTokens + e.outputs - c,
      context: c,
      remainingOut: Math.max(0, e.maxTokens - e.outputs),
      probe: false,
    });
  }
  waiting.push({
    remainingPrefill: promptIds.length - probeCached,
    context: probeCached,
    remainingOut: maxTokens,
    probe: true,
  });

  const p = pod.spec.profile;
  const cap = (n: number): number => capLongPrefill(eng.longPrefillTokenThreshold, n);
  const blocksOf = (w: Work): number => Math.ceil((w.context + w.remainingPrefill) / bs);
  let t = 0;
  for (let step = 0; step < 20_000; step++) {
    let budget = p.maxNumBatchedTokens;
    const sched: { w: Work; n: number }[] = [];
    for (const w of running) {
      if (budget <= 0) break;
      const n = w.remainingPrefill > 0 ? Math.min(cap(w.remainingPrefill), budget) : 1;
      sched.push({ w, n });
      budget -= n;
    }
    let used = running.reduce((s, w) => s + blocksOf(w), 0);
    while (waiting.length && budget > 0 && running.length < p.maxNumSeqs) {
      const w = waiting[0]!;
      if (used + blocksOf(w) > snap.capacityBlocks && running.length > 0) break;
      waiting.shift();
      running.push(w);
      used += blocksOf(w);
      const n = Math.min(cap(w.remainingPrefill), budget);
      sched.push({ w, n });
      budget -= n;
    }
    if (sched.length === 0) return Number.POSITIVE_INFINITY;
    const work: ScheduledWork[] = sched.map(({ w, n }) => ({
      requestId: '',
      numTokens: n,
      contextTokens: w.context,
    }));
    t += stepCost(p, work).totalMs;
    for (const { w, n } of sched) {
      w.context += n;
      if (w.remainingPrefill > 0) {
        w.remainingPrefill -= n;
        if (w.remainingPrefill === 0) {
          if (w.probe) return t + overheadMs;
          w.remainingOut--;
        }
      } else w.remainingOut--;
    }
    for (let i = running.length - 1; i >= 0; i--) if (running[i]!.remainingOut <= 0) running.splice(i, 1);
  }
  return Number.POSITIVE_INFINITY;
}

/** The limit: each request goes to the pod with the lowest exact TTFT (ties: fewest in flight). */
export function oracleArm(pods: () => readonly SimPod[], overheadMs: number): Arm {
  return {
    name: 'oracle',
    choose(req, views): ArmDecision {
      let best = '';
      let bestT = Number.POSITIVE_INFINITY;
      let bestLoad = Number.POSITIVE_INFINITY;
      for (const pod of pods()) {
        const t = exactTtftMs(pod, req.promptTokenIds, 256, overheadMs);
        const load = views.find((v) => v.id === pod.id)?.inFlight ?? 0;
        if (t < bestT - 1e-6 || (Math.abs(t - bestT) <= 1e-6 && load < bestLoad)) {
          best = pod.id;
          bestT = t;
          bestLoad = load;
        }
      }
      return { podId: best || views[0]!.id };
    },
  };
}
