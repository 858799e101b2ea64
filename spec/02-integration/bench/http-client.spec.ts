import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamChat } from '../../../bench/lib/live/http-client.js';

/** Three SSE tokens and the usage chunk, as vLLM streams them; `/stall` stops after the first token. */
function chat(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  req.on('end', () => {
    if (req.url === '/busy') {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"no capacity"}}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const variant = VARIANTS[req.url ?? ''];
    if (variant) {
      void (async () => {
        // A number pauses the stream that long (ms); a string goes out verbatim.
        for (const o of variant)
          if (typeof o === 'number') await sleep(o);
          else res.write(`data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`);
        res.end('data: [DONE]\n\n');
      })();
      return;
    }
    // /slow: a long prefill, nothing for 600 ms after the headers.
    setTimeout(() => stream(res, req.url === '/stall'), req.url === '/slow' ? 600 : 0);
  });
}

/** Streams as vLLM sends them in other cases (GuideLLM's handlers read them all). */
const VARIANTS: Record<string, unknown[]> = {
  // vLLM's create_streaming_error_response: a failure after some tokens, inside the 200 stream (the engine
  // died: EngineDeadError), written by json.dumps.
  '/midstream-error': [
    { choices: [{ delta: { role: 'assistant', content: '' } }] },
    { choices: [{ delta: { content: 'a' } }] },
    '{"error": {"message": "EngineCore encountered an issue. See stack trace (above) for the root cause.", ' +
      '"type": "InternalServerError", "param": null, "code": 500}}',
  ],
  // A reasoning model behind --reasoning-parser: the first tokens arrive as reasoning deltas.
  '/reasoning': [
    { choices: [{ delta: { role: 'assistant', content: '' } }] },
    { choices: [{ delta: { reasoning_content: 'hmm' } }] },
    { choices: [{ delta: { reasoning: ' so' } }] },
    200,
    { choices: [{ delta: { content: 'x' } }] },
    { choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 } },
  ],
  // Reasoning only (the budget ran out while thinking): still a successful request with tokens.
  '/reasoning-only': [
    { choices: [{ delta: { reasoning_content: 'hmm' } }] },
    { choices: [], usage: { prompt_tokens: 5, completion_tokens: 1 } },
  ],
  // /v1/completions streams choices[].text.
  '/v1/completions': [
    { object: 'text_completion', choices: [{ index: 0, text: 'p' }] },
    { object: 'text_completion', choices: [{ index: 0, text: 'q' }] },
    { choices: [], usage: { prompt_tokens: 2, completion_tokens: 2 } },
  ],
  // Continuous usage, then a final usage chunk without details: the last usage object counts.
  '/usage-last': [
    {
      choices: [{ delta: { content: 'a' } }],
      usage: { prompt_tokens: 9, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 8 } },
    },
    { choices: [], usage: { prompt_tokens: 9, completion_tokens: 1 } },
  ],
  '/garbage': [{ choices: [{ delta: { content: 'a' } }] }, '{not json'],
};

function stream(res: ServerResponse, stall: boolean): void {
  const chunk = (o: unknown): boolean => res.write(`data: ${JSON.stringify(o)}\n\n`);
  chunk({ choices: [{ delta: { content: 'a' } }] });
  if (stall) return; // never ends: the client's idle timeout must
  chunk({ choices: [{ delta: { content: 'b' } }] });
  chunk({ choices: [{ delta: { content: 'c' } }] });
  chunk({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 3 } });
  res.end('data: [DONE]\n\n');
}

const listen = (s: Server): Promise<number> =>
  new Promise((r) => s.listen(0, '127.0.0.1', () => r((s.address() as AddressInfo).port)));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// The load generator's client: GuideLLM's per-worker httpx pools (idle connections expire), its read
// timeout, failures kept with the server's words, and HTTPS.
describe('streamChat as bench:load uses it', () => {
  let server: Server;
  let port: number;
  let connections = 0;
  beforeAll(async () => {
    server = createServer(chat);
    server.on('connection', () => connections++);
    port = await listen(server);
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it('a worker pool reuses its connection, drops it after the keep-alive expiry, and pools do not share', async () => {
    const a = new Agent({ keepAlive: true, timeout: 300 });
    const b = new Agent({ keepAlive: true, timeout: 300 });
    const n0 = connections;
    const r1 = await streamChat('127.0.0.1', port, '{}', '/', { agent: a });
    expect(r1).toMatchObject({ ok: true, text: 'abc', outputTokens: 3, promptTokens: 7, error: null });
    await sleep(50);
    await streamChat('127.0.0.1', port, '{}', '/', { agent: a });
    expect(connections - n0).toBe(1);
    await streamChat('127.0.0.1', port, '{}', '/', { agent: b });
    expect(connections - n0).toBe(2);
    await sleep(700);
    await streamChat('127.0.0.1', port, '{}', '/', { agent: a });
    expect(connections - n0).toBe(3);
    // The expiry is for idle connections only: a request waiting longer for its first token is not cut.
    const slow = await streamChat('127.0.0.1', port, '{}', '/slow', { agent: a, idleTimeoutMs: 5000 });
    expect(slow).toMatchObject({ ok: true, text: 'abc' });
    a.destroy();
    b.destroy();
  });

  it('a stream silent past the idle timeout fails as a timeout; a refusal keeps the status and body', async () => {
    const t0 = performance.now();
    const stalled = await streamChat('127.0.0.1', port, '{}', '/stall', { idleTimeoutMs: 300 });
    expect(stalled.ok).toBe(false);
    expect(stalled.error).toMatch(/no data for 300 ms \(timeout\)/);
    expect(stalled.endMs - t0).toBeGreaterThanOrEqual(290);
    expect(stalled.endMs - t0).toBeLessThan(3000);
    const busy = await streamChat('127.0.0.1', port, '{}', '/busy');
    expect(busy).toMatchObject({
      ok: false,
      status: 503,
      error: 'HTTP 503: {"error":{"message":"no capacity"}}',
    });
  });

  it('reads streams as GuideLLM does: errors in the stream, reasoning and completion tokens, last usage', async () => {
    const failed = await streamChat('127.0.0.1', port, '{}', '/midstream-error');
    expect(failed).toMatchObject({
      ok: false,
      status: 200,
      error: 'stream error: EngineCore encountered an issue. See stack trace (above) for the root cause.',
    });
    expect(failed.firstTokenMs).not.toBeNull();

    // TTFT is the first reasoning delta, not the first content delta (that is GuideLLM's TTFOT).
    const reasoning = await streamChat('127.0.0.1', port, '{}', '/reasoning');
    expect(reasoning).toMatchObject({ ok: true, text: 'x', outputTokens: 3 });
    expect(reasoning.lastTokenMs! - reasoning.firstTokenMs!).toBeGreaterThanOrEqual(150);
    const thinking = await streamChat('127.0.0.1', port, '{}', '/reasoning-only');
    expect(thinking).toMatchObject({ ok: true, text: '', outputTokens: 1, error: null });

    const comp = await streamChat('127.0.0.1', port, '{}', '/v1/completions');
    expect(comp).toMatchObject({ ok: true, text: 'pq', outputTokens: 2, error: null });

    const usage = await streamChat('127.0.0.1', port, '{}', '/usage-last');
    expect(usage).toMatchObject({ ok: true, promptTokens: 9, cachedTokens: 0 });

    const garbage = await streamChat('127.0.0.1', port, '{}', '/garbage');
    expect(garbage.ok).toBe(false);
    expect(garbage.error).toMatch(/unparsable stream line/);
  });

  it('speaks HTTPS to a server with a certificate the agent trusts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kinf-tls-'));
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-days',
          '1',
          '-subj',
          '/CN=localhost',
          '-addext',
          'subjectAltName=IP:127.0.0.1',
          '-keyout',
          join(dir, 'key.pem'),
          '-out',
          join(dir, 'cert.pem'),
        ],
        { stdio: 'ignore' },
      );
      const cert = readFileSync(join(dir, 'cert.pem'));
      const tls = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert }, chat);
      const tlsPort = await listen(tls);
      try {
        const agent = new HttpsAgent({ keepAlive: true, ca: cert });
        const r = await streamChat('127.0.0.1', tlsPort, '{}', '/', { tls: true, agent });
        expect(r).toMatchObject({ ok: true, text: 'abc', status: 200 });
        // Without trusting it, the handshake fails and says why.
        const untrusted = await streamChat('127.0.0.1', tlsPort, '{}', '/', {
          tls: true,
          agent: new HttpsAgent(),
        });
        expect(untrusted.ok).toBe(false);
        expect(untrusted.error).toMatch(/self.signed|DEPTH_ZERO/i);
        agent.destroy();
      } finally {
        tls.closeAllConnections();
        tls.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
