import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_MODEL_LEN_LIMIT,
  MODEL_LIST_MAX_CARDS,
  modelListWindow,
} from '../../../src/collector/models/model-list.js';
import { modelsUrlOf } from '../../../src/collector/models/model-window-reader.js';

/** A card as vLLM's ModelCard serializes it (protocol.py); LoRA adapters' carry max_model_len null. */
const card = (id: string, maxModelLen: unknown, parent: string | null = null): Record<string, unknown> => ({
  id,
  object: 'model',
  created: 1_767_225_600,
  owned_by: 'vllm',
  root: parent === null ? id : `/loras/${id}`,
  parent,
  max_model_len: maxModelLen,
  permission: [{ id: 'modelperm-1', object: 'model_permission', allow_sampling: true }],
});
const list = (...cards: unknown[]): string => JSON.stringify({ object: 'list', data: cards });

describe('modelListWindow: a pod context window from its /v1/models', () => {
  it("takes the model's card, not its LoRA adapters' (which carry none)", () => {
    const text = list(card('Qwen/Qwen3-8B', 40_960), card('sql-lora', null, 'Qwen/Qwen3-8B'));
    expect(modelListWindow(text, 'Qwen/Qwen3-8B')).toEqual({ ok: true, maxModelLen: 40_960, matched: true });
  });

  it('takes the card named as the model among several served names', () => {
    const text = list(card('qwen', 32_768), card('Qwen/Qwen3-8B', 16_384));
    expect(modelListWindow(text, 'Qwen/Qwen3-8B')).toEqual({ ok: true, maxModelLen: 16_384, matched: true });
  });

  it('takes the smallest window of the other cards when none is named as the model, and says so', () => {
    const text = list(card('a', 32_768), card('b', 8192), card('lora', null, 'a'));
    expect(modelListWindow(text, 'Qwen/Qwen3-8B')).toEqual({ ok: true, maxModelLen: 8192, matched: false });
  });

  it('answers null when no card carries a window (an older server, another OpenAI server)', () => {
    expect(modelListWindow(list({ id: 'gpt', object: 'model' }), 'gpt')).toEqual({
      ok: true,
      maxModelLen: null,
      matched: false,
    });
    expect(modelListWindow(list(), 'gpt')).toEqual({ ok: true, maxModelLen: null, matched: false });
  });

  it('ignores windows that are not positive integers within bounds', () => {
    for (const bad of [0, -1, 1.5, '4096', true, null, MAX_MODEL_LEN_LIMIT + 1, 1e308, [4096], { n: 1 }])
      expect(modelListWindow(list(card('m', bad)), 'm')).toEqual({
        ok: true,
        maxModelLen: null,
        matched: false,
      });
    expect(modelListWindow(list(card('m', MAX_MODEL_LEN_LIMIT)), 'm')).toMatchObject({
      maxModelLen: MAX_MODEL_LEN_LIMIT,
    });
  });

  it('reports a body that is not a model list as a problem', () => {
    for (const text of ['', 'not json', '{"object":"list"', 'null', '[]', '42', '"s"', '{"data":{}}', '{}'])
      expect(modelListWindow(text, 'm')).toMatchObject({ ok: false });
  });

  it('looks at MODEL_LIST_MAX_CARDS cards at most', () => {
    const cards = Array.from({ length: MODEL_LIST_MAX_CARDS }, (_, i) => card(`lora-${i}`, null, 'm'));
    expect(modelListWindow(list(...cards, card('m', 4096)), 'm')).toMatchObject({ maxModelLen: null });
    expect(modelListWindow(list(card('m', 4096), ...cards), 'm')).toMatchObject({ maxModelLen: 4096 });
  });

  it('never throws, on any text or any JSON', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        expect(modelListWindow(text, 'm')).toHaveProperty('ok');
      }),
    );
    fc.assert(
      fc.property(fc.jsonValue(), fc.array(fc.jsonValue()), (v, data) => {
        expect(modelListWindow(JSON.stringify(v), 'm')).toHaveProperty('ok');
        const r = modelListWindow(JSON.stringify({ object: 'list', data }), 'm');
        expect(r.ok).toBe(true);
      }),
    );
    // Deep nesting: JSON.parse's own limit is a caught error, not a crash.
    expect(modelListWindow('['.repeat(1_000_000), 'm')).toMatchObject({ ok: false });
  });
});

describe('modelsUrlOf', () => {
  it('is /v1/models on the host and port of the pod /metrics URL', () => {
    expect(modelsUrlOf('http://10.0.0.7:8000/metrics')).toBe('http://10.0.0.7:8000/v1/models');
    expect(modelsUrlOf('https://pod.ns.svc:8443/prefix/metrics?x=1')).toBe(
      'https://pod.ns.svc:8443/v1/models',
    );
    expect(modelsUrlOf('not a url')).toBeNull();
  });
});
