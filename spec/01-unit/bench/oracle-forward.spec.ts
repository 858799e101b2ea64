import { describe, expect, it } from 'vitest';
import { L40S_27B_FP8 } from '../../../emulator/profiles.js';
import { exactTtftMs } from '../../../bench/lib/des/oracle-arm.js';
import { SimPod } from '../../../bench/lib/des/pod.js';

/**
 * The oracle arm's forward model (exactTtftMs) against the engine it models: a new request's TTFT predicted
 * from a pod's state, with a long prefill in progress, against the TTFT the engine then gives it, with and
 * without vLLM's long_prefill_token_threshold.
 */
const tokens = (n: number, from: number): number[] => Array.from({ length: n }, (_, i) => from + i);

function realized(threshold: number): { predicted: number; actual: number } {
  const pod = new SimPod(
    'p',
    '127.0.0.1:1',
    {
      profile: L40S_27B_FP8,
      kvCapacityTokens: 94_208,
      blockSize: 16,
      eosTokenId: 0,
      outputVocab: tokens(100, 1),
      ...(threshold > 0 ? { longPrefillTokenThreshold: threshold } : {}),
    },
    7,
  );
  const add = (id: string, promptTokenIds: number[], maxTokens: number, at: number): void => {
    pod.ledger.set(id, {
      promptTokens: promptTokenIds.length,
      maxTokens,
      computed: 0,
      outputs: 0,
      admitted: false,
      blockHashes: null,
    });
    pod.engine.addRequest({ id, promptTokenIds, maxTokens, ignoreEos: true }, at);
  };
  const step = (): void => {
    const t = pod.engine.nextEventTimeMs()!;
    for (const o of pod.engine.advanceTo(t)) if (o.kind === 'step') pod.noteStep(o);
  };
  add('long', tokens(8000, 1000), 4, 0);
  step();
  step(); // two chunks of the long prompt are in
  const now = pod.engine.clockMs;
  const short = tokens(300, 50_000);
  const predicted = exactTtftMs(pod, short, 1, 0);
  add('short', short, 1, now);
  for (let i = 0; i < 10_000; i++) {
    const t = pod.engine.nextEventTimeMs();
    if (t === null) break;
    for (const o of pod.engine.advanceTo(t)) {
      if (o.kind !== 'step') continue;
      pod.noteStep(o);
      if (o.tokens.some((x) => x.requestId === 'short')) return { predicted, actual: o.endMs - now };
    }
  }
  throw new Error('the short request got no token');
}

describe('oracle forward model', () => {
  it('predicts the engine behind a long prefill: exactly, and with long_prefill_token_threshold within a step', () => {
    const plain = realized(0);
    const capped = realized(512);
    // Behind a full-budget chunk the step in flight is the one the model replays first: exact.
    expect(plain.predicted).toBeCloseTo(plain.actual, 6);
    // With the cap the model lets the request join the step in flight (it starts from the last finished
    // step): optimistic by at most that step.
    expect(capped.predicted).toBeLessThan(capped.actual);
    expect(capped.actual - capped.predicted).toBeLessThan(150); // one 512-token step here: ~133 ms
    // The cap lets the short prompt in beside the long one instead of after it.
    expect(capped.actual).toBeLessThan(plain.actual / 3);
  });
});
