import { beforeAll, describe, expect, it } from 'vitest';
import { loadModelSetup, type ModelSetup } from '../../../bench/lib/setup.js';
import { ConversationClient } from '../../../bench/lib/workload/client.js';
import { prepareRequest } from '../../../bench/lib/workload/prepare.js';
import {
  PUBLISHED_SHAPES,
  WorkloadFactory,
  type WorkloadShapes,
} from '../../../bench/lib/workload/workloads.js';
import { Rng } from '../../../bench/lib/rng.js';

// Small shapes keep the test fast; the token arithmetic is the same as the published 16k shapes.
const SHAPES: WorkloadShapes = {
  control: { promptTokens: 700, outputTokens: 8 },
  'shared-prefix': { prefixCount: 3, prefixTokens: 640, promptTokens: 64, outputTokens: 8 },
  multiturn: { turns: 3, firstPromptTokens: 500, promptTokens: 40, outputTokens: 8 },
};

let m: ModelSetup;
beforeAll(async () => {
  m = await loadModelSetup();
}, 60_000);

describe('token-exact synthesis on the real Qwen3 tokenizer', () => {
  it('uses single-token words and produces exactly N tokens, tag first', async () => {
    expect(m.vocab.ids.length).toBeGreaterThan(1000);
    for (const n of [20, 257, 1600, PUBLISHED_SHAPES['shared-prefix'].promptTokens]) {
      const text = await m.synth.text(`t1 c${n} m0`, n, new Rng(n));
      expect(text.startsWith(`t1 c${n} m0`)).toBe(true);
      expect(await m.synth.count(text)).toBe(n);
    }
  });

  it('is fresh per trial and identical across arms of one trial', async () => {
    const a = new WorkloadFactory('control', SHAPES, m.synth, 42, 0);
    const b = new WorkloadFactory('control', SHAPES, m.synth, 42, 0);
    const c = new WorkloadFactory('control', SHAPES, m.synth, 42, 1);
    const ta = await a.conversation(5).userText(0);
    expect(await b.conversation(5).userText(0)).toBe(ta);
    expect(await c.conversation(5).userText(0)).not.toBe(ta);
  });

  it('shared-prefix puts one of the prefixes in a system message, control prompts share no block', async () => {
    const f = new WorkloadFactory('shared-prefix', SHAPES, m.synth, 7, 0);
    const client = new ConversationClient(f);
    const seen = new Map<number, string>();
    for (let i = 0; i < 12; i++) {
      const t = await client.next();
      expect(t.messages[0]!.role).toBe('system');
      expect(await m.synth.count(t.messages[0]!.content)).toBe(640);
      const p = t.conv.prefixIndex!;
      if (seen.has(p)) expect(t.messages[0]!.content).toBe(seen.get(p));
      seen.set(p, t.messages[0]!.content);
      const r = await prepareRequest(t, m.model, m.template, m.promptTokenizer);
      // Template adds a handful of tokens around 640 + 64 content tokens.
      expect(r.promptTokenIds.length).toBeGreaterThanOrEqual(704);
      expect(r.promptTokenIds.length).toBeLessThan(720);
      expect(JSON.parse(r.body)).toMatchObject({ max_tokens: 8, ignore_eos: true, stream: true });
    }
    expect(seen.size).toBeGreaterThan(1);
  });

  it('multiturn sends the full history with the actual reply, follow-ups before new conversations', async () => {
    const f = new WorkloadFactory('multiturn', SHAPES, m.synth, 3, 0);
    const client = new ConversationClient(f);
    const t0 = await client.next();
    const other = await client.next(); // no follow-up ready yet: a new conversation
    expect(other.conv.id).not.toBe(t0.conv.id);
    client.complete(t0, ' alpha beta');
    const t1 = await client.next();
    expect(t1.conv.id).toBe(t0.conv.id);
    expect(t1.turn).toBe(1);
    expect(t1.messages.map((x) => x.role)).toEqual(['user', 'assistant', 'user']);
    expect(t1.messages[1]!.content).toBe(' alpha beta');
    expect(await m.synth.count(t1.messages[2]!.content)).toBe(40);
    const p0 = await prepareRequest(t0, m.model, m.template, m.promptTokenizer);
    const p1 = await prepareRequest(t1, m.model, m.template, m.promptTokenizer);
    // The earlier prompt is a token prefix of the follow-up: the pod can reuse its KV.
    expect(p1.promptTokenIds.slice(0, p0.promptTokenIds.length)).toEqual(p0.promptTokenIds);
    client.complete(t1, ' gamma');
    const t2 = await client.next();
    expect(t2.turn).toBe(2);
    client.complete(t2, ' delta'); // last turn: the conversation ends
    const t3 = await client.next();
    expect(t3.turn).toBe(0);
  });
});

describe('conversations belong to the worker that started them (GuideLLM turns_queue)', () => {
  it('a worker takes only its own ready follow-ups and otherwise starts a conversation', async () => {
    const f = new WorkloadFactory('multiturn', SHAPES, m.synth, 5, 0);
    const client = new ConversationClient(f);
    const a = await client.next(0);
    const b = await client.next(1);
    client.complete(a, ' one');
    const fromOther = await client.next(1); // worker 1 has no ready turn: new conversation
    expect(fromOther.turn).toBe(0);
    expect([a.conv.id, b.conv.id]).not.toContain(fromOther.conv.id);
    const own = await client.next(0);
    expect(own.conv.id).toBe(a.conv.id);
    expect(own.turn).toBe(1);
  });
});
