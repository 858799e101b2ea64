import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** Small real HTTP servers for the stand-in, plugin and e2e tests: upstreams, an SSE "vLLM", a sink. */

export interface Captured {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export interface TestServer {
  url: string;
  port: number;
  requests: Captured[];
  close(): Promise<void>;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const a = server.address();
  if (!a || typeof a === 'string') throw new Error('no address');
  return a.port;
}

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function startServer(
  handler: (req: Captured, res: ServerResponse) => void | Promise<void>,
): Promise<TestServer> {
  const requests: Captured[] = [];
  const server = createServer((req, res) => {
    void readAll(req).then(async (body) => {
      const c: Captured = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      requests.push(c);
      await handler(c, res);
    });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** An upstream that answers JSON naming itself, so a test sees which pod served the request. */
export function startNamedUpstream(name: string): Promise<TestServer> {
  return startServer((req, res) => {
    const body = JSON.stringify({ served_by: name, path: req.url });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
}

export interface SseUpstream extends TestServer {
  /** Lets every open stream finish (they hold after the first token until released). */
  release(): void;
  /** Streams opened from now on hold again until the next release (for a `hold: true` upstream). */
  hold(): void;
}

/**
 * Streams a chat completion the way vLLM does (vllm.md §5): headers and the role chunk go out with the first
 * token, then content chunks, a finish chunk and `data: [DONE]`. Each stream holds after its first content
 * chunk until `release()`, so a test can prove the first byte reached the client before the upstream ended.
 * Non-streaming requests get a chat.completion JSON.
 */
export async function startSseUpstream(name: string, opts: { hold?: boolean } = {}): Promise<SseUpstream> {
  let released = !opts.hold;
  const waiting: (() => void)[] = [];
  const gate = (): Promise<void> => (released ? Promise.resolve() : new Promise((r) => waiting.push(r)));
  const srv = await startServer(async (req, res) => {
    let stream = false;
    let model = 'unknown';
    try {
      const b = JSON.parse(req.body.toString('utf8')) as { stream?: boolean; model?: string };
      stream = b.stream === true;
      model = b.model ?? model;
    } catch {
      // not JSON: answer anyway, like a lenient upstream
    }
    const id = `chatcmpl-${name}-${srv.requests.length}`;
    const created = Math.floor(Date.now() / 1000);
    if (!stream) {
      const body = JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [
          { index: 0, message: { role: 'assistant', content: `hello from ${name}` }, finish_reason: 'stop' },
        ],
        usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
      });
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'x-pod': name,
      });
      res.end(body);
      return;
    }
    const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-pod': name });
    res.write(chunk({ role: 'assistant', content: '' }) + chunk({ content: `hello from ${name}` }));
    await gate();
    res.write(chunk({ content: ' and goodbye' }));
    res.write(chunk({}, 'stop'));
    res.end('data: [DONE]\n\n');
  });
  return {
    ...srv,
    release: () => {
      released = true;
      for (const w of waiting.splice(0)) w();
    },
    hold: () => {
      released = false;
    },
  };
}

/** Collects JSON POST bodies (probe reports, OTLP/HTTP JSON exports). */
export interface Sink extends TestServer {
  bodies: unknown[];
}

export async function startSink(): Promise<Sink> {
  const bodies: unknown[] = [];
  const srv = await startServer((req, res) => {
    try {
      bodies.push(JSON.parse(req.body.toString('utf8')));
    } catch {
      bodies.push(req.body.toString('utf8'));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  return { ...srv, bodies };
}
