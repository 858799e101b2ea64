// Output tokens of an answer the plugin cannot read, estimated from the bytes Kong sent.
/**
 * An external Kong plugin sees no response body (no body_filter phase; a `response` phase would buffer and
 * break streaming), only what kong.log.serialize() gives: response.size (nginx's $bytes_sent: status line,
 * headers, chunked framing and body), the response headers and the status. vLLM streams one SSE event per
 * token (docs/usage.md), each `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,
 * "choices":[{"index":0,"delta":{"content":"<text>"},"logprobs":null,"finish_reason":null}]}\n\n`, so
 *   tokens = (bytes_sent − header bytes − fixed stream bytes) / (chunk bytes without text + text bytes per token)
 * Exact: the status line and the headers Kong logged, each chunk's JSON around its text (the model name and
 * id length known), the role chunk, the finish chunk's extra fields, `[DONE]`, chunked framing per event.
 * Estimated: the text bytes of a token (TEXT_BYTES_PER_TOKEN), headers nginx adds after the log's copy
 * (Date, Connection, Transfer-Encoding when absent), and the framing when several events share one chunk.
 * A chunk is ~190 bytes without its text, so one byte of text per token off is ~0.5% of the count.
 */

/** Text bytes of one output token: ~4 characters of English per BPE token (JSON escaping adds little). */
export const TEXT_BYTES_PER_TOKEN = 4;
/** vLLM's ids: `chatcmpl-` and a uuid4 in hex. */
const CHAT_ID_CHARS = 'chatcmpl-'.length + 32;
/** `created`: Unix seconds, 10 digits until 2286. */
const CREATED_DIGITS = 10;
/** `data: [DONE]\n\n`. */
const DONE_BYTES = 14;
/** The HTTP/1.1 chunked terminator `0\r\n\r\n`. */
const LAST_CHUNK_BYTES = 5;
/** The finish chunk's extras: `"stop"` in place of `null`, and `,"stop_reason":null`. */
const FINISH_EXTRA_BYTES = 2 + ',"stop_reason":null'.length;
/** Headers nginx and Node add to the wire but not to the log's copy, counted when the copy lacks them. */
const WIRE_HEADERS: Record<string, number> = {
  date: 'Date: Sun, 06 Dec 2026 23:38:02 GMT\r\n'.length,
  connection: 'Connection: keep-alive\r\n'.length,
  'transfer-encoding': 'Transfer-Encoding: chunked\r\n'.length,
};
/** A non-streamed chat.completion without its text: ~560 bytes (id, choice, message fields, usage). */
const COMPLETION_JSON_BYTES = 560;

export type HeaderMap = Record<string, string | string[] | undefined>;

export interface SentResponse {
  status: number;
  /** response.size: $bytes_sent. */
  bytesSent: number;
  headers: HeaderMap;
  /** The model name the pod writes in each chunk (the request's model: the LoRA adapter when one was named). */
  model: string;
}

export interface OutputEstimate {
  tokens: number;
  /** true: counted exactly (no answer body: an error status); false: estimated from bytes. */
  exact: boolean;
  streamed: boolean;
}

const utf8 = (s: string): number => Buffer.byteLength(s, 'utf8');

function headerValues(h: HeaderMap, name: string): string[] {
  for (const [k, v] of Object.entries(h))
    if (k.toLowerCase() === name) return v === undefined ? [] : Array.isArray(v) ? v : [v];
  return [];
}

/** The status line and headers as an HTTP/1.1 server writes them, plus the wire headers the log lacks. */
export function headerBytes(status: number, headers: HeaderMap): number {
  let n = utf8(`HTTP/1.1 ${status} OK\r\n`) + 2;
  const seen = new Set<string>();
  for (const [k, v] of Object.entries(headers)) {
    seen.add(k.toLowerCase());
    for (const x of v === undefined ? [] : Array.isArray(v) ? v : [v]) n += utf8(`${k}: ${x}\r\n`);
  }
  for (const [k, b] of Object.entries(WIRE_HEADERS)) if (!seen.has(k)) n += b;
  return n;
}

/** One SSE event as a chunked-encoding chunk: `<hex length>\r\n<event>\r\n`. */
const framed = (event: number): number => event.toString(16).length + 4 + event;

/** The bytes of one streamed chat chunk with an empty text, the `data: ` and blank line included. */
export function chatChunkBytes(model: string, delta: Record<string, string>): number {
  const json = JSON.stringify({
    id: 'x'.repeat(CHAT_ID_CHARS),
    object: 'chat.completion.chunk',
    created: 10 ** (CREATED_DIGITS - 1),
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: null }],
  });
  return utf8(`data: ${json}\n\n`);
}

/**
 * Output tokens of a chat completion from the bytes sent. An error status has no output (exact 0); a
 * compressed body cannot be read this way (null: unknown). Streamed: the SSE arithmetic above. Not
 * streamed: the body minus a chat.completion's JSON, over TEXT_BYTES_PER_TOKEN (coarser: no per-token
 * overhead to anchor it).
 */
export function estimateOutputTokens(r: SentResponse): OutputEstimate | null {
  const type = headerValues(r.headers, 'content-type')[0] ?? '';
  const streamed = /^text\/event-stream/i.test(type);
  if (r.status < 200 || r.status >= 300) return { tokens: 0, exact: true, streamed };
  const encoding = headerValues(r.headers, 'content-encoding')[0];
  if (encoding !== undefined && encoding !== 'identity') return null;
  const body = r.bytesSent - headerBytes(r.status, r.headers);
  if (!streamed) {
    const text = body - COMPLETION_JSON_BYTES - utf8(r.model);
    return { tokens: Math.max(0, Math.round(text / TEXT_BYTES_PER_TOKEN)), exact: false, streamed };
  }
  const perToken = framed(chatChunkBytes(r.model, { content: '' }) + TEXT_BYTES_PER_TOKEN);
  const fixed =
    framed(chatChunkBytes(r.model, { role: 'assistant', content: '' })) +
    FINISH_EXTRA_BYTES +
    framed(DONE_BYTES) +
    LAST_CHUNK_BYTES;
  const tokens = Math.max(0, Math.round((body - fixed) / perToken));
  return { tokens, exact: false, streamed };
}
