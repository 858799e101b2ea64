import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseChatBody, parseChatRequest } from '../../../src/core/request.js';
import { loadChatTemplate, loadTokenizer } from '../../../src/tokenize/index.js';
import { waitFor } from '../../helpers/ports.js';
import { LORA, MODEL, postJson, startTestFleet, type TestFleet } from './emulator-fleet.js';

// Streaming options the OpenAI SDK does not type but passes through (vLLM extras).
type Extra = { ignore_eos?: boolean; cache_salt?: string };

const SYSTEM = 'You are a meticulous assistant. '.repeat(40);

describe('emulated vLLM OpenAI API (live, real HTTP)', () => {
  let f: TestFleet;
  let base: string;
  let client: OpenAI;

  beforeAll(async () => {
    f = await startTestFleet(1);
    base = (f.pods[0] as { base: string }).base;
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await f?.close();
  });

  async function streamChat(user: string, extra: Extra = {}) {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: user },
      ],
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
      ...extra,
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    return chunks;
  }

  it('streams a role chunk with the first token, content deltas, a usage chunk (cached_tokens on a repeat)', async () => {
    const first = await streamChat('Tell me about prefix caching.', { ignore_eos: true });
    expect(first[0]?.choices[0]?.delta).toEqual({ role: 'assistant', content: '' });
    expect(first[1]?.choices[0]?.delta.content).toMatch(/^ \w+$/);
    const content = first.filter((c) => c.choices.length > 0).slice(1);
    expect(content).toHaveLength(12);
    expect(content.at(-1)?.choices[0]?.finish_reason).toBe('length');
    expect(content.slice(0, -1).every((c) => c.choices[0]?.finish_reason === null)).toBe(true);
    const usage = first.at(-1);
    expect(usage?.choices).toEqual([]);
    expect(usage?.usage?.completion_tokens).toBe(12);
    expect(usage?.usage?.total_tokens).toBe((usage?.usage?.prompt_tokens ?? 0) + 12);
    expect(usage?.usage?.prompt_tokens_details).toBeUndefined();
    expect(new Set(first.map((c) => c.id)).size).toBe(1);
    expect(first[0]?.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);

    const again = await streamChat('Tell me about prefix caching.', { ignore_eos: true });
    const u = again.at(-1)?.usage;
    const prompt = u?.prompt_tokens ?? 0;
    expect(u?.prompt_tokens_details?.cached_tokens).toBe(Math.floor((prompt - 1) / 16) * 16);

    // Same shared system prompt, different question: exactly the full blocks of the common prefix hit.
    const other = await streamChat('And about chunked prefill?', { ignore_eos: true });
    const cached = other.at(-1)?.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    const tokens = async (user: string) =>
      (
        await postJson(`${base}/tokenize`, {
          messages: [
            { role: 'system', content: SYSTEM },
            { role: 'user', content: user },
          ],
        })
      ).json.tokens as number[];
    const [a, b] = [
      await tokens('Tell me about prefix caching.'),
      await tokens('And about chunked prefill?'),
    ];
    let common = 0;
    while (a[common] === b[common]) common++;
    expect(common).toBeGreaterThan(200);
    expect(cached).toBe(Math.floor(common / 16) * 16);

    // A cache_salt isolates the prefix cache.
    const salted = await streamChat('Tell me about prefix caching.', {
      ignore_eos: true,
      cache_salt: 'tenant-b',
    });
    expect(salted.at(-1)?.usage?.prompt_tokens_details).toBeUndefined();
  });

  it('answers non-streaming chat and completions with usage, and honours max_tokens', async () => {
    const chat = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
      ignore_eos: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(chat.object).toBe('chat.completion');
    expect(chat.choices[0]?.message.role).toBe('assistant');
    expect(chat.choices[0]?.finish_reason).toBe('length');
    expect(chat.usage?.completion_tokens).toBe(5);
    expect(chat.choices[0]?.message.content?.split(' ').filter(Boolean)).toHaveLength(5);

    const comp = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 4 });
    expect(comp.object).toBe('text_completion');
    expect(comp.usage?.completion_tokens).toBeLessThanOrEqual(4);
    const ids = await client.completions.create({
      model: MODEL,
      prompt: [1, 2, 3, 4, 5],
      max_tokens: 2,
      stream: false,
    });
    expect(ids.usage?.prompt_tokens).toBe(5);

    const streamed = await client.completions.create({
      model: MODEL,
      prompt: 'abc',
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
      ignore_eos: true,
    } as OpenAI.CompletionCreateParamsStreaming);
    const chunks: OpenAI.Completion[] = [];
    for await (const c of streamed) chunks.push(c);
    expect(chunks.filter((c) => c.choices.length > 0).map((c) => c.usage?.completion_tokens)).toEqual([
      1, 2, 3,
    ]);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(3);

    // CompletionRequest.max_tokens defaults to 16 (chat's runs to max_model_len).
    const dflt = await postJson(`${base}/v1/completions`, { model: MODEL, prompt: 'abc', ignore_eos: true });
    expect(dflt.status).toBe(200);
    expect((dflt.json.usage as { completion_tokens: number }).completion_tokens).toBe(16);
    expect((dflt.json.choices as { finish_reason: string }[])[0]?.finish_reason).toBe('length');
  });

  it('puts prompt_tokens_details on the final usage chunk only, not on continuous usage chunks', async () => {
    const body = {
      model: MODEL,
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'Continuous usage, please.' },
      ],
      max_tokens: 3,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    };
    const read = async () => {
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const lines = (await res.text()).split('\n\n').filter((l) => l.startsWith('data: {'));
      return lines.map(
        (l) => JSON.parse(l.slice(6)) as { choices: unknown[]; usage?: Record<string, unknown> },
      );
    };
    await read();
    const chunks = await read(); // the repeat hits the cache
    const final = chunks.at(-1)!;
    expect(final.choices).toEqual([]);
    expect(final.usage?.prompt_tokens_details).toMatchObject({ cached_tokens: expect.any(Number) });
    const continuous = chunks.slice(0, -1);
    expect(continuous).toHaveLength(4); // role chunk + 3 tokens
    for (const c of continuous)
      expect(Object.keys(c.usage ?? {})).toEqual(['prompt_tokens', 'total_tokens', 'completion_tokens']);
    expect(continuous[0]?.usage?.completion_tokens).toBe(0);
  });

  it('serves LoRA adapters as models, /v1/models, /health and /version', async () => {
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    expect(ids).toEqual([MODEL, LORA]);
    const lora = await client.chat.completions.create({
      model: LORA,
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    expect(lora.model).toBe(LORA);
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(await health.text()).toBe('');
    expect((await (await fetch(`${base}/version`)).json()) as object).toHaveProperty('version');
  });

  it('tokenizes in the chat and prompt forms exactly as the chat endpoint renders', async () => {
    const m = f.config.models[MODEL]!;
    const tok = loadTokenizer(m.tokenizer);
    const tpl = loadChatTemplate(m.chat_template);
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Καλημέρα 😀' },
    ];
    const parsed = parseChatRequest({ model: MODEL, messages });
    if (!parsed.ok) throw new Error(parsed.detail);
    const want = await tok.encode(tpl.render(parsed.request));
    const chat = await postJson(`${base}/tokenize`, { model: MODEL, messages, add_generation_prompt: true });
    expect(chat.status).toBe(200);
    expect(chat.json).toEqual({ count: want.length, max_model_len: 32768, tokens: want, token_strs: null });
    const prompt = await postJson(`${base}/tokenize`, { prompt: 'hello world', return_token_strs: true });
    expect(prompt.json.tokens).toEqual(await tok.encode('hello world'));
    expect(prompt.json.token_strs).toEqual(['hello', ' world']);
    const de = await postJson(`${base}/detokenize`, { tokens: prompt.json.tokens });
    expect(de.json).toEqual({ prompt: 'hello world' });

    // The chat endpoint sees the same prompt: usage.prompt_tokens equals /tokenize's count.
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: messages as OpenAI.ChatCompletionMessageParam[],
      max_tokens: 1,
    });
    expect(r.usage?.prompt_tokens).toBe(want.length);
  });

  it('reads tool numbers as json.loads does: the router and the pod tokenize a `1.0` alike', async () => {
    const m = f.config.models[MODEL]!;
    const tok = loadTokenizer(m.tokenizer);
    const tpl = loadChatTemplate(m.chat_template);
    const text = JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'Scale it.' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'scale',
            parameters: { type: 'object', properties: { f: { type: 'number', default: 'F' } } },
          },
        },
      ],
      add_generation_prompt: true,
    }).replace('"F"', '1.0');
    const routed = parseChatBody(text);
    if (!routed.ok) throw new Error(routed.detail);
    const want = await tok.encode(tpl.render(routed.request));
    const res = await fetch(`${base}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: text,
    });
    const got = (await res.json()) as { tokens: number[] };
    expect(got.tokens).toEqual(want);
    const de = await postJson(`${base}/detokenize`, { tokens: got.tokens });
    expect(String(de.json.prompt)).toContain('"default": 1.0}');
  });

  it('answers errors in vLLM shape', async () => {
    const noModel = await postJson(`${base}/v1/chat/completions`, {
      model: 'nope',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(noModel.status).toBe(404);
    expect(noModel.json).toEqual({
      error: {
        message: 'The model `nope` does not exist.',
        type: 'NotFoundError',
        param: 'model',
        code: 404,
      },
    });
    const tooLong = await postJson(`${base}/v1/completions`, {
      model: MODEL,
      prompt: [1, 2, 3],
      max_tokens: 40000,
    });
    expect(tooLong.status).toBe(400);
    expect((tooLong.json.error as { message: string }).message).toMatch(
      /maximum context length is 32768 tokens/,
    );
    // vLLM's SamplingParams check; /v1/completions' max_tokens defaults to 16.
    const minOverMax = await postJson(`${base}/v1/completions`, {
      model: MODEL,
      prompt: 'hi',
      min_tokens: 17,
    });
    expect(minOverMax.status).toBe(400);
    expect(minOverMax.json).toMatchObject({
      error: { message: 'min_tokens must be less than or equal to max_tokens=16, got 17.', code: 400 },
    });
    const badJson = await fetch(`${base}/v1/completions`, { method: 'POST', body: '{' });
    expect(badJson.status).toBe(400);
    expect((await badJson.json()) as object).toMatchObject({ error: { type: 'BadRequestError', code: 400 } });
    expect((await fetch(`${base}/nowhere`)).status).toBe(404);
  });

  it('frees a request when the client disconnects mid-stream', async () => {
    const ac = new AbortController();
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'long' }],
        max_tokens: 5000,
        ignore_eos: true,
        stream: true,
      }),
      signal: ac.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    const running = async () =>
      ((await (await fetch(`${base}/emulator/state`)).json()) as { ranks: { running: number }[] }).ranks[0]
        ?.running;
    expect(await running()).toBe(1);
    ac.abort();
    await waitFor('request aborted', async () => (await running()) === 0);
  });
});
