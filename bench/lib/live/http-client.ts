import { Agent, request } from 'node:http';

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
}

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

interface Chunk {
  choices?: { delta?: { content?: string | null } }[];
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
}

/** POSTs an OpenAI streaming chat body and times the SSE stream; the clock is performance.now(). */
export function streamChat(
  host: string,
  port: number,
  body: string,
  path = '/v1/chat/completions',
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
    };
    let buf = '';
    let streamed = 0;
    const onLine = (line: string): void => {
      if (!line.startsWith('data: ')) return;
      const data = line.slice(6).trim();
      if (data === '[DONE]') return;
      let c: Chunk;
      try {
        c = JSON.parse(data) as Chunk;
      } catch {
        return;
      }
      const content = c.choices?.[0]?.delta?.content;
      if (typeof content === 'string' && content.length > 0) {
        const now = performance.now();
        t.firstTokenMs ??= now;
        t.lastTokenMs = now;
        t.text += content;
        streamed++;
      }
      if (c.usage) {
        t.outputTokens = c.usage.completion_tokens ?? t.outputTokens;
        t.promptTokens = c.usage.prompt_tokens ?? t.promptTokens;
        t.cachedTokens = c.usage.prompt_tokens_details?.cached_tokens ?? t.cachedTokens;
      }
    };
    const req = request(
      {
        host,
        port,
        path,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        t.status = res.statusCode ?? 0;
        const id = res.headers['x-kong-request-id'];
        if (typeof id === 'string') t.requestId = id;
        const ra = Number(res.headers['retry-after']);
        if (t.status === 429 && Number.isFinite(ra)) t.retryAfterS = ra;
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          buf += d;
          let i: number;
          while ((i = buf.indexOf('\n')) >= 0) {
            onLine(buf.slice(0, i));
            buf = buf.slice(i + 1);
          }
        });
        res.on('end', () => {
          t.endMs = performance.now();
          // GuideLLM prefers the server's usage count, else the streamed iterations.
          if (t.outputTokens === 0) t.outputTokens = streamed;
          t.ok = t.status === 200 && t.firstTokenMs !== null;
          resolve(t);
        });
      },
    );
    req.on('error', () => {
      t.endMs = performance.now();
      resolve(t);
    });
    req.end(body);
  });
}
