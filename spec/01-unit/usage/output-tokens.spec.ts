import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chatChunk, chatRoleChunk, sse } from '../../../emulator/server/openai-protocol.js';
import { TEXT_BYTES_PER_TOKEN, estimateOutputTokens, headerBytes } from '../../../src/usage/index.js';

const MODEL = 'Qwen/Qwen3-8B';
/** Headers as kong.log.serialize() gives them for a streamed answer through Kong. */
const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  via: '1.1 kong/3.9.1',
  'x-kong-upstream-latency': '412',
  'x-kong-proxy-latency': '3',
  'x-kong-request-id': '5d1c0f6a2b7e4f7c9a0b1c2d3e4f5a6b',
};

/**
 * The bytes nginx sends for a streamed chat answer, built with the emulator's own chunk builders (vLLM's
 * field order): status line and headers (plus the wire headers the log's copy lacks), then each SSE event as
 * one HTTP/1.1 chunk, then the terminator.
 */
function wireBytes(texts: string[], finish = 'stop'): number {
  const head = { id: `chatcmpl-${'a'.repeat(32)}`, created: 1772423572, model: MODEL };
  const events = [sse(chatRoleChunk(head, null))];
  texts.forEach((t, i) =>
    events.push(sse(chatChunk(head, { content: t }, i === texts.length - 1 ? finish : null, null))),
  );
  events.push('data: [DONE]\n\n');
  const framed = events.map((e) => {
    const n = Buffer.byteLength(e);
    return n.toString(16).length + 4 + n;
  });
  const headers =
    Buffer.byteLength('HTTP/1.1 200 OK\r\n') +
    Object.entries(HEADERS).reduce((a, [k, v]) => a + Buffer.byteLength(`${k}: ${v}\r\n`), 0) +
    Buffer.byteLength(
      'Date: Sun, 06 Dec 2026 23:38:02 GMT\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n',
    );
  return headers + framed.reduce((a, b) => a + b, 0) + 5;
}

const estimate = (bytesSent: number, status = 200) =>
  estimateOutputTokens({ status, bytesSent, headers: HEADERS, model: MODEL });

describe('output tokens from the bytes Kong sent (SSE: one chat.completion.chunk per token)', () => {
  it('counts the headers as an HTTP/1.1 server writes them', () => {
    expect(headerBytes(200, { a: 'b' })).toBe(
      Buffer.byteLength('HTTP/1.1 200 OK\r\na: b\r\n\r\n') + 37 + 24 + 28,
    );
  });

  it(`is exact when every token's text is ${TEXT_BYTES_PER_TOKEN} bytes: the rest of the arithmetic is exact`, () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3000 }), (n) => {
        const r = estimate(wireBytes(Array.from({ length: n }, () => ' abc')));
        expect(r).toEqual({ tokens: n, exact: false, streamed: true });
      }),
    );
  });

  it('property: with any text per token the error is its text bytes off the assumed ones over the chunk size', () => {
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^ [a-z]{0,9}$/), { minLength: 20, maxLength: 2000 }),
        (texts) => {
          const r = estimate(wireBytes(texts, 'length'))!;
          const mean = texts.reduce((a, t) => a + Buffer.byteLength(t), 0) / texts.length;
          // One token's chunk is ~190 bytes here; ±1 for rounding and the finish reason's length.
          const bound = (Math.abs(mean - TEXT_BYTES_PER_TOKEN) / 180) * texts.length + 1;
          expect(Math.abs(r.tokens - texts.length)).toBeLessThanOrEqual(bound);
        },
      ),
    );
  });

  it('an error status has no output (exact 0); a compressed body is unknown', () => {
    expect(estimate(900, 429)).toEqual({ tokens: 0, exact: true, streamed: true });
    expect(
      estimateOutputTokens({
        status: 200,
        bytesSent: 5000,
        headers: { ...HEADERS, 'content-encoding': 'gzip' },
        model: MODEL,
      }),
    ).toBeNull();
  });

  it('a non-streamed answer is estimated from its body size alone (coarser: no per-token anchor)', () => {
    const r = estimateOutputTokens({
      status: 200,
      bytesSent: 400 + 560 + MODEL.length + 4 * 100,
      headers: { 'content-type': 'application/json', 'content-length': '1000' },
      model: MODEL,
    })!;
    expect(r.streamed).toBe(false);
    expect(r.exact).toBe(false);
    expect(r.tokens).toBeGreaterThan(50);
  });
});
