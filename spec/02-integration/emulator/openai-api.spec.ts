import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseChatBody, parseChatRequest } from '../../../src/core/request.js';
import { loadChatTemplate, loadTokenizer } from '../../../src/tokenize/index.js';
import { waitFor } from '../../helpers/ports.js';
import { LORA, MODEL, postJson, startTestFleet, type TestFleet } from './emulator-fleet.js';

// Streaming options the OpenAI SDK does not type but passes through (vLLM extras).
type Extra = { ignore_eos?: boolean; cache_salt?: string };

const JSON_TYPE = { 'content-type': 'application/json' };

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
    // TokenizeParams: the requested output alone above max_model_len (f"{max_total_tokens=}" and all).
    const tooLong = await postJson(`${base}/v1/completions`, {
      model: MODEL,
      prompt: [1, 2, 3],
      max_tokens: 40000,
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json).toEqual({
      error: {
        message:
          'max_tokens=40000 cannot be greater than max_model_len=max_total_tokens=32768. Please request fewer ' +
          'output tokens. (parameter=max_tokens, value=40000)',
        type: 'BadRequestError',
        param: 'max_tokens',
        code: 400,
      },
    });
    // vLLM's SamplingParams check; /v1/completions' max_tokens defaults to 16.
    const minOverMax = await postJson(`${base}/v1/completions`, {
      model: MODEL,
      prompt: 'hi',
      min_tokens: 17,
    });
    expect(minOverMax.status).toBe(400);
    expect(minOverMax.json).toEqual({
      error: {
        message: 'min_tokens must be less than or equal to max_tokens=16, got 17.',
        type: 'BadRequestError',
        param: null,
        code: 400,
      },
    });
    expect((await fetch(`${base}/nowhere`)).status).toBe(404);
  });

  /** A POST with the body and headers as given (fetch would add a text/plain content type to a string). */
  const rawPost = async (
    path: string,
    body: string | Buffer,
    headers: Record<string, string> = JSON_TYPE,
  ) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers, body });
    const text = await res.text();
    return { status: res.status, type: res.headers.get('content-type'), text };
  };
  const errorOf = (text: string) => (JSON.parse(text) as { error: Record<string, unknown> }).error;

  it('reads the body as vLLM’s FastAPI app does: content type, JSON, UTF-8, no body, not an object', async () => {
    const ok = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    expect((await rawPost('/v1/chat/completions', ok)).status).toBe(200);
    // validate_json_request: application/json only (parameters aside), for every JSON endpoint.
    const unsupported = {
      message: "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
      type: 'Bad Request',
      param: null,
      code: 400,
    };
    const others: Record<string, string>[] = [
      {},
      { 'content-type': 'text/plain' },
      { 'content-type': 'application/vnd.api+json' },
    ];
    for (const headers of others) {
      const r = await rawPost('/v1/chat/completions', ok, headers);
      expect(r.status, JSON.stringify(headers)).toBe(400);
      expect(errorOf(r.text)).toEqual(unsupported);
    }
    expect(
      (await rawPost('/v1/chat/completions', ok, { 'content-type': 'Application/JSON; charset=utf-8' }))
        .status,
    ).toBe(200);
    expect(errorOf((await rawPost('/tokenize', '{"prompt": "x"}', {})).text)).toEqual(unsupported);
    // json.loads' error, where it stopped (a code-point index), as a json_invalid validation error.
    const truncated = await rawPost('/v1/chat/completions', '{"model": "m", "messages": [');
    expect(truncated.status).toBe(400);
    expect(errorOf(truncated.text)).toEqual({
      message:
        "1 validation error:\n  {'type': 'json_invalid', 'loc': ('body', 28), 'msg': 'JSON decode error', " +
        "'input': {}, 'ctx': {'error': 'Expecting value'}}",
      type: 'Bad Request',
      param: 'body.28',
      code: 400,
    });
    // An astral character counts once, as in a Python string.
    expect(errorOf((await rawPost('/v1/completions', '{"😀": "x" "y"}')).text)).toEqual({
      message:
        "1 validation error:\n  {'type': 'json_invalid', 'loc': ('body', 10), 'msg': 'JSON decode error', " +
        "'input': {}, 'ctx': {'error': \"Expecting ',' delimiter\"}}",
      type: 'Bad Request',
      param: 'body.10',
      code: 400,
    });
    // Not UTF-8: the body cannot be read at all.
    expect(errorOf((await rawPost('/v1/completions', Buffer.from([0x7b, 0xff, 0x7d]))).text)).toEqual({
      message: 'There was an error parsing the body',
      type: 'Bad Request',
      param: null,
      code: 400,
    });
    // No body, or null: the request model is missing.
    for (const body of ['', 'null'])
      expect(errorOf((await rawPost('/v1/chat/completions', body)).text), body).toEqual({
        message:
          "1 validation error:\n  {'type': 'missing', 'loc': ('body',), 'msg': 'Field required', 'input': None}",
        type: 'Bad Request',
        param: 'body',
        code: 400,
      });
    // Not an object: the first model validator calls .get on it, an AttributeError, which pydantic does not
    // turn into a validation error: vLLM's catch-all handler answers it with a 500.
    for (const [body, type] of [
      ['[1]', 'list'],
      ['"x"', 'str'],
      ['5', 'int'],
      ['true', 'bool'],
    ]) {
      const r = await rawPost('/v1/completions', body!);
      expect(r.status, body).toBe(500);
      expect(errorOf(r.text)).toEqual({
        message: `'${type}' object has no attribute 'get'`,
        type: 'InternalServerError',
        param: null,
        code: 500,
      });
    }
    // json.loads takes NaN: here it reaches pydantic, which refuses it as an int.
    expect(errorOf((await rawPost('/v1/completions', '{"prompt": "x", "max_tokens": NaN}')).text)).toEqual({
      message:
        "1 validation error:\n  {'type': 'finite_number', 'loc': ('body', 'max_tokens'), 'msg': 'Input should be " +
        "a finite number', 'input': nan}",
      type: 'Bad Request',
      param: 'body.max_tokens',
      code: 400,
    });
  });

  it('answers a body nested deeper than json.loads recurses as vLLM does, never with a JS stack overflow', async () => {
    const parseFailed = {
      message: 'There was an error parsing the body',
      type: 'Bad Request',
      param: null,
      code: 400,
    };
    const nest = (n: number, inner = '') => '['.repeat(n) + inner + ']'.repeat(n);
    const chat = (extra: string) =>
      `{"model": "${MODEL}", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1, ${extra}}`;
    // json.loads (CPython 3.12, vLLM's image) recurses once per level: ~1490 levels parse, one more raises
    // RecursionError, which FastAPI answers as a body it could not parse.
    expect((await rawPost('/v1/chat/completions', chat(`"x": ${nest(1489)}`))).status).toBe(200);
    const top = await rawPost('/v1/completions', nest(1490));
    expect(top.status).toBe(500);
    expect(errorOf(top.text).message).toBe("'list' object has no attribute 'get'");
    const bodies: [string, string][] = [
      ['/v1/chat/completions', chat(`"x": ${nest(1490)}`)],
      ['/v1/completions', nest(1491)],
      ['/v1/completions', nest(200_000)],
      // Deep inside a field the request model reads, and inside json.loads-only syntax (NaN), and invalid
      // past the limit: the recursion fails first.
      ['/v1/chat/completions', chat(`"vllm_xargs": {"a": ${nest(50_000)}}`)],
      ['/v1/completions', `{"prompt": "x", "max_tokens": NaN, "x": ${nest(50_000)}}`],
      ['/v1/completions', `{"prompt": "x", "x": ${'['.repeat(50_000)}oops`],
      ['/tokenize', `{"prompt": "x", "x": ${'{"a": '.repeat(50_000)}1${'}'.repeat(50_000)}}`],
      ['/detokenize', nest(50_000)],
    ];
    for (const [path, body] of bodies) {
      const r = await rawPost(path, body);
      expect(r.status, `${path} ${body.slice(0, 80)}`).toBe(400);
      expect(errorOf(r.text)).toEqual(parseFailed);
    }
    // An error json.loads meets before the limit is still its own.
    const early = await rawPost('/v1/completions', `{"prompt": x ${'['.repeat(50_000)}`);
    expect(errorOf(early.text).message).toContain("'ctx': {'error': 'Expecting value'}");
    // The pod still serves.
    expect((await rawPost('/v1/chat/completions', chat('"stream": false'))).status).toBe(200);
  });

  it('validates the body before it looks the model up; "" is the base model', async () => {
    const bad = await postJson(`${base}/v1/chat/completions`, {
      model: 'nope',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 'ten',
    });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({
      error: {
        message:
          "1 validation error:\n  {'type': 'int_parsing', 'loc': ('body', 'max_tokens'), 'msg': 'Input should be " +
          "a valid integer, unable to parse string as an integer', 'input': 'ten'}",
        type: 'Bad Request',
        param: 'body.max_tokens',
        code: 400,
      },
    });
    const empty = await postJson(`${base}/v1/chat/completions`, {
      model: '',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    expect(empty.status).toBe(200);
    expect(empty.json.model).toBe(MODEL);
    const none = await postJson(`${base}/v1/completions`, { prompt: 'x', max_tokens: 1 });
    expect(none.json.model).toBe(MODEL);
  });

  it('reads max_tokens as pydantic does ("10" is 10) and checks it as SamplingParams does', async () => {
    const ten = await postJson(`${base}/v1/chat/completions`, {
      model: MODEL,
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: '10',
      ignore_eos: true,
    });
    expect(ten.status).toBe(200);
    expect((ten.json.usage as { completion_tokens: number }).completion_tokens).toBe(10);
    for (const chat of [true, false]) {
      const zero = await postJson(
        `${base}/v1/${chat ? 'chat/completions' : 'completions'}`,
        chat
          ? { model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 0 }
          : { prompt: 'x', max_tokens: 0 },
      );
      expect(zero.status).toBe(400);
      expect(zero.json).toEqual({
        error: {
          message: 'max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)',
          type: 'BadRequestError',
          param: 'max_tokens',
          code: 400,
        },
      });
    }
    // Chat without max_tokens gets what max_model_len leaves: min_tokens is checked against that.
    const messages = [{ role: 'user', content: 'how many?' }];
    const n = ((await postJson(`${base}/tokenize`, { messages })).json.count as number) ?? 0;
    const minOver = await postJson(`${base}/v1/chat/completions`, {
      model: MODEL,
      messages,
      min_tokens: 40000,
    });
    expect(minOver.json.error).toEqual({
      message: `min_tokens must be less than or equal to max_tokens=${32768 - n}, got 40000.`,
      type: 'BadRequestError',
      param: null,
      code: 400,
    });
  });

  it('refuses a context that is too long with the renderer’s messages (characters, then tokens)', async () => {
    const m = f.config.models[MODEL]!;
    const tpl = loadChatTemplate(m.chat_template);
    const chatText = (content: string): string => {
      const parsed = parseChatRequest({ model: MODEL, messages: [{ role: 'user', content }] });
      if (!parsed.ok) throw new Error(parsed.detail);
      return tpl.render(parsed.request);
    };
    // max_tokens 32760 leaves 8 input tokens: text is tokenized up to 9, so vLLM says "at least 9".
    const short = 'Tell me everything about prefix caching in vLLM, please.';
    const tokens = await postJson(`${base}/v1/chat/completions`, {
      model: MODEL,
      messages: [{ role: 'user', content: short }],
      max_tokens: 32760,
    });
    expect(tokens.status).toBe(400);
    expect(tokens.json.error).toEqual({
      message:
        "This model's maximum context length is 32768 tokens. However, you requested 32760 output tokens and " +
        'your prompt contains at least 9 input tokens, for a total of at least 32769 tokens. Please reduce the ' +
        'length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=9)',
      type: 'BadRequestError',
      param: 'input_tokens',
      code: 400,
    });
    // Qwen3's longest vocabulary entry is 128 characters: more than 8 × 128 is refused before tokenizing.
    const long = 'word '.repeat(300);
    const chars = [...chatText(long)].length;
    const byChars = await postJson(`${base}/v1/chat/completions`, {
      model: MODEL,
      messages: [{ role: 'user', content: long }],
      max_tokens: 32760,
      stream: true,
    });
    expect(byChars.status).toBe(400);
    expect(byChars.json.error).toEqual({
      message:
        "This model's maximum context length is 32768 tokens. However, you requested 32760 output tokens and " +
        `your prompt contains ${chars} characters (more than 1024 characters, which is the upper bound for 8 ` +
        'input tokens). Please reduce the length of the input prompt or the number of requested output tokens. ' +
        `(parameter=input_text, value=${chars})`,
      type: 'BadRequestError',
      param: 'input_text',
      code: 400,
    });
    // Token ids are counted exactly.
    const ids = await postJson(`${base}/v1/completions`, {
      prompt: Array.from({ length: 10 }, (_, i) => i + 1),
      max_tokens: 32760,
    });
    expect((ids.json.error as { message: string }).message).toBe(
      "This model's maximum context length is 32768 tokens. However, you requested 32760 output tokens and " +
        'your prompt contains 10 input tokens, for a total of 32770 tokens. Please reduce the length of the ' +
        'input prompt or the number of requested output tokens. (parameter=input_tokens, value=10)',
    );
  });

  it('stream_options: {} is allowed without stream and asks for no usage (include_usage defaults to false)', async () => {
    const read = async (body: Record<string, unknown>) => {
      const r = await rawPost('/v1/chat/completions', JSON.stringify(body));
      return r.text.split('\n\n').filter((l) => l.startsWith('data: {'));
    };
    const base0 = {
      model: MODEL,
      messages: [{ role: 'user', content: 'usage?' }],
      max_tokens: 2,
      ignore_eos: true,
    };
    const empty = await read({ ...base0, stream: true, stream_options: {} });
    expect(empty).toHaveLength(3); // role chunk + 2 tokens, no usage chunk
    expect(empty.some((l) => l.includes('"usage"'))).toBe(false);
    const asked = await read({ ...base0, stream: true, stream_options: { include_usage: true } });
    expect(JSON.parse(asked.at(-1)!.slice(6))).toMatchObject({
      choices: [],
      usage: { completion_tokens: 2 },
    });
    expect((await postJson(`${base}/v1/chat/completions`, { ...base0, stream_options: {} })).status).toBe(
      200,
    );
    const refused = await postJson(`${base}/v1/completions`, {
      prompt: 'x',
      stream_options: { include_usage: true },
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toEqual({
      message:
        "1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, Stream options " +
        "can only be defined when `stream=True`. (parameter=stream_options)', 'input': {'prompt': 'x', " +
        "'stream_options': {'include_usage': True}}, 'ctx': {'error': VLLMValidationError('Stream options can " +
        "only be defined when `stream=True`.')}}",
      type: 'Bad Request',
      param: 'stream_options',
      code: 400,
    });
  });

  it('cache_salt has no length cap; an empty prompt is validate_prompt_and_prompt_embeds', async () => {
    const salted = await postJson(`${base}/v1/completions`, {
      prompt: 'x',
      max_tokens: 1,
      cache_salt: 's'.repeat(2000),
    });
    expect(salted.status).toBe(200);
    const empty = await postJson(`${base}/v1/completions`, { model: MODEL, prompt: '' });
    expect(empty.status).toBe(400);
    expect(empty.json.error).toEqual({
      message:
        "1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, Either prompt or " +
        "prompt_embeds must be provided and non-empty. (parameter=prompt)', 'input': {'model': 'Qwen/Qwen3-8B', " +
        "'prompt': ''}, 'ctx': {'error': VLLMValidationError('Either prompt or prompt_embeds must be provided and " +
        "non-empty.')}}",
      type: 'Bad Request',
      param: 'prompt',
      code: 400,
    });
  });

  it('X-data-parallel-rank: int() of it pins a rank; what int() refuses is ignored; out of range is a ValueError', async () => {
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    for (const rank of ['abc', '1.0', '', ' 0 '])
      expect(
        (await rawPost('/v1/chat/completions', body, { ...JSON_TYPE, 'x-data-parallel-rank': rank })).status,
      ).toBe(200);
    const outOfRange = {
      error: {
        message: 'data_parallel_rank 3 is out of range [0, 1).',
        type: 'BadRequestError',
        param: null,
        code: 400,
      },
    };
    const plain = await rawPost('/v1/chat/completions', body, { ...JSON_TYPE, 'x-data-parallel-rank': '3' });
    expect(plain.status).toBe(400);
    expect(JSON.parse(plain.text)).toEqual(outOfRange);
    // Streaming: vLLM has answered 200 when the engine client raises, so the error is a chunk (json.dumps).
    const streamed = await rawPost(
      '/v1/chat/completions',
      JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], stream: true }),
      { ...JSON_TYPE, 'x-data-parallel-rank': '3' },
    );
    expect(streamed.status).toBe(200);
    expect(streamed.type).toMatch(/^text\/event-stream/);
    expect(streamed.text).toBe(
      'data: {"error": {"message": "data_parallel_rank 3 is out of range [0, 1).", "type": "BadRequestError", ' +
        '"param": null, "code": 400}}\n\ndata: [DONE]\n\n',
    );
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

describe('emulated vLLM: template failures and engine death (live, real HTTP)', () => {
  let f: TestFleet;
  let base: string;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kinf-emu-template-'));
    const template = join(dir, 'template.jinja');
    // A template that, like many real ones, raises on a conversation it cannot render.
    writeFileSync(
      template,
      '{%- if messages | length == 0 %}{{ raise_exception("No messages: it\'s empty") }}{%- endif %}' +
        '{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}' +
        '<|im_start|>assistant\n',
    );
    f = await startTestFleet(1, {}, {}, { chat_template: `hf:${template}` });
    base = (f.pods[0] as { base: string }).base;
  });
  afterAll(async () => {
    await f?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an empty messages list goes to the template; its failure is a 400 BadRequestError with its text', async () => {
    const r = await postJson(`${base}/v1/chat/completions`, { model: MODEL, messages: [], max_tokens: 1 });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: { message: "No messages: it's empty", type: 'BadRequestError', param: null, code: 400 },
    });
    const tok = await postJson(`${base}/tokenize`, { model: MODEL, messages: [] });
    expect(tok.json).toEqual(r.json);
    const fine = await postJson(`${base}/v1/chat/completions`, {
      model: MODEL,
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    expect(fine.status).toBe(200);
  });

  it('fails requests in flight when the engine dies: EngineDeadError, in the stream or as a 500', async () => {
    const long = {
      model: MODEL,
      messages: [{ role: 'user', content: 'go on' }],
      max_tokens: 5000,
      ignore_eos: true,
    };
    const streamRes = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...long, stream: true }),
    });
    const reader = (streamRes.body as ReadableStream<Uint8Array>).getReader();
    await reader.read(); // the first token is out: the request is running
    const plain = postJson(`${base}/v1/chat/completions`, long);
    const running = async () =>
      ((await (await fetch(`${base}/emulator/state`)).json()) as { ranks: { running: number }[] }).ranks[0]
        ?.running;
    await waitFor('both requests running', async () => (await running()) === 2);
    expect((await postJson(`${base}/emulator/restart`, {})).status).toBe(200);
    let rest = '';
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += decoder.decode(value, { stream: true });
    }
    const dead = 'EngineCore encountered an issue. See stack trace (above) for the root cause.';
    expect(
      rest.endsWith(
        `data: {"error": {"message": "${dead}", "type": "InternalServerError", "param": null, "code": 500}}\n\n` +
          'data: [DONE]\n\n',
      ),
    ).toBe(true);
    expect(await plain).toEqual({
      status: 500,
      json: { error: { message: dead, type: 'InternalServerError', param: null, code: 500 } },
    });
  });
});
