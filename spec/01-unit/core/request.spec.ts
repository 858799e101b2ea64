import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseChatBody, parseChatRequest } from '../../../src/core/request.js';

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

  // Every media part vLLM accepts (chat_utils MM_PARSER_MAP): the right reason on the span, not body_not_chat.
  it.each(['input_image', 'image_pil', 'image_embeds', 'audio_url', 'audio_embeds', 'video_embeds'])(
    '%s part → multimodal_content',
    (type) => {
      const r = parseChatRequest({
        model: 'm',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'q' }, { type }] }],
      });
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.reason).toBe('multimodal_content');
    },
  );

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
