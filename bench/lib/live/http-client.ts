// streamChat: POSTs a streaming chat completion and times its SSE stream as GuideLLM does.
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/** Client-side timestamps of one streamed chat completion (GuideLLM's _resolve_streaming), real ms. */
export interface StreamTiming {
  ok: boolean;
  startMs: number;
  firstTokenMs: number | null;
  lastTokenMs: number | null;
  endMs: number;
  outputTokens: number;
  cachedTokens: number;
  promptTokens: number;
  text: string;
  status: number;
  /** Retry-After of a 429 (the gateway's shedding), seconds; null otherwise. */
  retryAfterS: number | null;
  /** Kong's X-Kong-Request-Id (through the gateway; null from a pod). */
  requestId: string | null;
  /** Why the request failed: the socket error, the timeout, or the start of a non-200 body. */
  error: string | null;
}

/** How to reach an endpoint beyond host, port and path (the standalone load generator's options). */
export interface StreamOptions {
  /** HTTPS instead of HTTP. */
  tls?: boolean;
  /** The connection pool (one per client worker, as GuideLLM's httpx clients); default a shared keep-alive pool. */
  agent?: Agent | HttpsAgent;
  headers?: Record<string, string>;
  /** Fail the request when the stream is silent this long (httpx's read timeout); default none. */
  idleTimeoutMs?: number;
  /** Cancels the request (the connection closes; vLLM then aborts it). */
  signal?: AbortSignal;
  /** Called with the response's status and headers when they arrive (real ms, performance.now()). */
  onResponse?(status: number, headers: IncomingHttpHeaders, atMs: number): void;
}

/** How much of a failed response's body an error keeps. */
const ERROR_BODY_CHARS = 300;

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

interface Chunk {
  choices?: {
    delta?: {
      content?: string | null;
      reasoning?: string | null;
      reasoning_content?: string | null;
      tool_calls?: unknown[] | null;
    };
    /** /v1/completions streams text, not a delta. */
    text?: string | null;
  }[];
  /** vLLM reports a failure inside a 200 stream as `data: {"error": …}` before [DONE]. */
  error?: unknown;
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
}

function errorMessage(e: unknown): string {
  if (typeof e === 'object' && e !== null) {
    const o = e as { message?: unknown; type?: unknown; code?: unknown };
    const m = o.message || o.type || o.code;
    if (m !== undefined && m !== null && m !== '') return String(m).slice(0, ERROR_BODY_CHARS);
    return JSON.stringify(e).slice(0, ERROR_BODY_CHARS);
  }
  return String(e).slice(0, ERROR_BODY_CHARS);
}

/**
 * POSTs an OpenAI streaming chat body and times the SSE stream; the clock is performance.now(). Token and
 * cache counts come from the stream's usage, which vLLM sends only when the body asks for it explicitly
 * (`stream_options: {include_usage: true}`; an empty `stream_options` asks for none since vLLM #36379): a body
 * without it gets `outputTokens` from the streamed chunks and 0 prompt and cached tokens.
 */
export function streamChat(
  host: string,
  port: number,
  body: string,
  path = '/v1/chat/completions',
  opts: StreamOptions = {},
): Promise<StreamTiming> {
  return new Promise((resolve) => {
    const t: StreamTiming = {
      ok: false,
      startMs: performance.now(),
      firstTokenMs: null,
      lastTokenMs: null,
      endMs: 0,
      outputTokens: 0,
      cachedTokens: 0,
      promptTokens: 0,
      text: '',
      status: 0,
      retryAfterS: null,
      requestId: null,
      error: null,
    };
    let errorBody = '';
    let buf = '';
    let streamed = 0;
    let streamError: string | null = null;
    let doneSeen = false;
    const onLine = (raw: string): void => {
      // GuideLLM's extract_line_data: "data:" lines only; nothing after [DONE] or an error counts.
      const line = raw.trim();
      if (doneSeen || streamError !== null || !line.startsWith('data:')) return;
      const data = line.slice(5).trim();
      if (data === '[DONE]') {
        doneSeen = true;
        return;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(data);
      } catch {
        // json.loads raises there: the request is errored.
        streamError = `unparsable stream line: ${data.slice(0, 80)}`;
        return;
      }
      if (typeof parsed !== 'object' || parsed === null) return;
      const c = parsed as Chunk;
      // GuideLLM's _check_streaming_error: an error payload fails the request, whatever came before it.
      if (c.error !== undefined && c.error !== null && c.error !== false && c.error !== '') {
        streamError = `stream error: ${errorMessage(c.error)}`;
        return;
      }
      // GuideLLM's add_streaming_line: a line counts as a token iteration when it carries content,
      // reasoning (reasoning models' TTFT is the first reasoning token), tool-call deltas, or completion text.
      const choice = c.choices?.[0];
      const delta = choice?.delta;
      const content = delta?.content ?? choice?.text;
      const reasoning = delta?.reasoning || delta?.reasoning_content;
      const calls = delta?.tool_calls;
      const toolCalls = Array.isArray(calls) && calls.length > 0;
      const hasContent = typeof content === 'string' && content.length > 0;
      if (hasContent || (typeof reasoning === 'string' && reasoning.length > 0) || toolCalls) {
        const now = performance.now();
        t.firstTokenMs ??= now;
        t.lastTokenMs = now;
        if (hasContent) t.text += content;
        streamed++;
      }
      if (c.usage) {
        // GuideLLM keeps the last usage object whole: vLLM's continuous usage chunks carry no
        // prompt_tokens_details, its final usage chunk does (when the hit is non-zero).
        t.outputTokens = c.usage.completion_tokens ?? t.outputTokens;
        t.promptTokens = c.usage.prompt_tokens ?? t.promptTokens;
        t.cachedTokens = c.usage.prompt_tokens_details?.cached_tokens ?? 0;
      }
    };
    let settled = false;
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      t.endMs = performance.now();
      t.ok = false;
      t.error = why;
      resolve(t);
    };
    const request = opts.tls ? httpsRequest : httpRequest;
    const req = request(
      {
        host,
        port,
        path,
        method: 'POST',
        agent: opts.agent ?? (opts.tls ? undefined : agent),
        ...(opts.signal ? { signal: opts.signal } : {}),
        headers: {
          ...opts.headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        t.status = res.statusCode ?? 0;
        opts.onResponse?.(t.status, res.headers, performance.now());
        const id = res.headers['x-kong-request-id'];
        if (typeof id === 'string') t.requestId = id;
        const ra = Number(res.headers['retry-after']);
        if (t.status === 429 && Number.isFinite(ra)) t.retryAfterS = ra;
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (t.status !== 200) {
            if (errorBody.length < ERROR_BODY_CHARS) errorBody += d;
            return;
          }
          buf += d;
          let i: number;
          while ((i = buf.indexOf('\n')) >= 0) {
            onLine(buf.slice(0, i));
            buf = buf.slice(i + 1);
          }
        });
        res.on('end', () => {
          if (settled) return;
          settled = true;
          t.endMs = performance.now();
          // GuideLLM prefers the server's usage count, else the streamed iterations.
          if (t.outputTokens === 0) t.outputTokens = streamed;
          t.ok = t.status === 200 && t.firstTokenMs !== null && streamError === null;
          if (t.status !== 200)
            t.error = `HTTP ${t.status}: ${errorBody.slice(0, ERROR_BODY_CHARS).trim() || '(no body)'}`;
          else if (streamError !== null) t.error = streamError;
          else if (!t.ok) t.error = 'the stream ended without a token';
          resolve(t);
        });
        res.on('error', (e) => fail(e.message));
      },
    );
    if (opts.idleTimeoutMs !== undefined)
      req.setTimeout(opts.idleTimeoutMs, () =>
        req.destroy(new Error(`no data for ${opts.idleTimeoutMs} ms (timeout)`)),
      );
    req.on('error', (e: NodeJS.ErrnoException) => fail(e.code ? `${e.code}: ${e.message}` : e.message));
    req.end(body);
  });
}
