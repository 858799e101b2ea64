import { describe, expect, it } from 'vitest';
import * as A from '../../../src/telemetry/attributes.js';
import { decisionAttributes, type DecisionRecord } from '../../../src/telemetry/decision-attributes.js';
import type { Prediction } from '../../../src/core/predictor.js';

function pred(
  podId: string,
  cachedTokens: number,
  queueMs: number,
  predictedTtftMs: number,
  indexAgeMs: number | null,
): Prediction {
  return {
    podId,
    address: `${podId}:8000`,
    healthy: true,
    cachedTokens,
    cpuTokens: 0,
    uncachedTokens: 100,
    queuedTokens: 0,
    running: 1,
    waiting: 2,
    queueMs,
    prefillMs: 1,
    loadMs: 0,
    interferenceMs: 0,
    overheadMs: 25,
    modelTtftMs: predictedTtftMs,
    ttftFactor: 1,
    predictedTtftMs,
    indexAgeMs,
    cacheCredit: 1,
    partialSinceMs: 0,
    predictedItlMs: null,
    withinItl: true,
    reasons: [],
  };
}

const a = pred('pod-a', 960, 10.12345, 55.5, 120.4);
const b = pred('pod-b', 0, 0, 90, null);
const rec: DecisionRecord = {
  target: { host: 'pod-a', port: 8000, podId: 'pod-a' },
  decision: { candidates: [a, b], chosen: a, fallbackReason: null },
  fallbackReason: null,
  model: 'base',
  lora: 'adapter',
  promptTokens: 1000,
  truncated: false,
  blocks: 62,
  promptChars: { cached: 3100, tokenized: 900 },
  timings: {
    parseMs: 0.1,
    templateMs: 0.2,
    tokenizeMs: 0.3,
    keysMs: 0.4,
    lookupMs: 0.5,
    predictMs: 0.6,
    totalMs: 2.1,
  },
  shed: null,
};

describe('decision → span attributes', () => {
  it('records every candidate as parallel arrays, best first', () => {
    const at = decisionAttributes(rec);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_POD_IDS]).toEqual(['pod-a', 'pod-b']);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_CACHED_TOKENS]).toEqual([960, 0]);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_QUEUE_MS]).toEqual([10.123, 0]);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_PREDICTED_TTFT_MS]).toEqual([55.5, 90]);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_INDEX_AGE_MS]).toEqual([120, -1]);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_COUNT]).toBe(2);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_PREDICTED_ITL_MS]).toEqual([-1, -1]); // guard off
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_WITHIN_ITL]).toEqual([true, true]);
  });

  it("records the ITL guard's verdicts, an unbounded prediction capped", () => {
    const guarded = {
      ...rec,
      decision: {
        ...rec.decision,
        candidates: [
          { ...a, predictedItlMs: 87.65432 },
          { ...b, predictedItlMs: Number.POSITIVE_INFINITY, withinItl: false },
        ],
      },
    };
    const at = decisionAttributes(guarded);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_PREDICTED_ITL_MS]).toEqual([87.654, 1e9]);
    expect(at[A.ATTR_KINFERENCE_CANDIDATES_WITHIN_ITL]).toEqual([true, false]);
  });

  it('uses GenAI semantic-convention names for model and prompt tokens', () => {
    const at = decisionAttributes(rec);
    expect(at['gen_ai.request.model']).toBe('adapter'); // what the client asked for
    expect(at['gen_ai.usage.input_tokens']).toBe(1000);
    expect(at['gen_ai.operation.name']).toBe('chat');
    expect(at[A.ATTR_KINFERENCE_MODEL_BASE]).toBe('base');
    expect(at['server.address']).toBe('pod-a');
    expect(at['server.port']).toBe(8000);
  });

  it('records the choice, the index age behind it, the timings, and no fallback when there is none', () => {
    const at = decisionAttributes(rec);
    expect(at).toMatchObject({
      [A.ATTR_KINFERENCE_CHOSEN_POD_ID]: 'pod-a',
      [A.ATTR_KINFERENCE_CHOSEN_CACHED_TOKENS]: 960,
      [A.ATTR_KINFERENCE_CHOSEN_PREDICTED_TTFT_MS]: 55.5,
      [A.ATTR_KINFERENCE_INDEX_AGE_MS]: 120,
      [A.ATTR_KINFERENCE_TARGET]: 'pod',
      [A.ATTR_KINFERENCE_DURATION_TOKENIZE_MS]: 0.3,
      [A.ATTR_KINFERENCE_PROMPT_CACHED_CHARS]: 3100,
      [A.ATTR_KINFERENCE_PROMPT_TOKENIZED_CHARS]: 900,
      [A.ATTR_KINFERENCE_DURATION_LOOKUP_MS]: 0.5,
      [A.ATTR_KINFERENCE_DURATION_ROUTE_MS]: 2.1,
    });
    expect(at).not.toHaveProperty(A.ATTR_KINFERENCE_FALLBACK_REASON);
  });

  it('records a fallback reason and a kong-default target', () => {
    const at = decisionAttributes({
      ...rec,
      target: null,
      decision: { candidates: [], chosen: null, fallbackReason: 'index_timeout' },
      fallbackReason: 'index_timeout',
      fallbackDetail: 'index lookup over 25 ms',
    });
    expect(at).toMatchObject({
      [A.ATTR_KINFERENCE_FALLBACK_REASON]: 'index_timeout',
      [A.ATTR_KINFERENCE_FALLBACK_DETAIL]: 'index lookup over 25 ms',
      [A.ATTR_KINFERENCE_TARGET]: 'kong-default',
    });
    expect(at).not.toHaveProperty('server.address');
    expect(at['gen_ai.operation.name']).toBe('chat'); // a chat request whose lookup timed out
  });

  it('names no gen_ai operation for a body it did not read as a chat request', () => {
    for (const reason of ['body_too_large', 'body_not_json', 'body_not_chat'] as const) {
      const at = decisionAttributes({
        ...rec,
        decision: { ...rec.decision, fallbackReason: reason },
        fallbackReason: reason,
      });
      expect(at, reason).not.toHaveProperty('gen_ai.operation.name');
    }
  });
});
