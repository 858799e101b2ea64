// The engine-only TTFT of one uncached request on an idle emulated pod (for the SLO).
import { SimPod, type PodSpec } from './pod.js';

/** TTFT of one uncached request of `promptTokens` on an idle pod, engine time only (virtual ms). */
export function idleUncachedTtftMs(spec: PodSpec, promptTokens: number): number {
  const pod = new SimPod('idle', '127.0.0.1:1', spec, 1);
  const ids = Array.from({ length: promptTokens }, (_, i) => spec.outputVocab[i % spec.outputVocab.length]!);
  const r = pod.engine.addRequest({ id: 'probe', promptTokenIds: ids, maxTokens: 2, ignoreEos: true }, 0);
  if (!r.ok) throw new Error(r.message);
  for (let guard = 0; guard < 100_000; guard++) {
    const t = pod.engine.nextEventTimeMs();
    if (t === null) break;
    for (const o of pod.engine.advanceTo(t))
      if (o.kind === 'step') for (const tok of o.tokens) if (tok.first) return tok.latencyMs;
  }
  throw new Error('idle probe produced no token');
}
