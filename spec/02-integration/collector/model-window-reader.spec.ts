import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/collector/logger.js';
import { MODEL_LIST_MAX_BYTES } from '../../../src/collector/models/model-list.js';
import { ModelWindowReader } from '../../../src/collector/models/model-window-reader.js';
import { freePort, waitFor } from '../../helpers/ports.js';

/**
 * The collector's /v1/models reader against a real HTTP server: a vLLM answer is written; a 404, a huge or
 * endless body, a server that never answers and a closed port write nothing, throw nothing, and are logged
 * once; a restart (refresh) reads a new window at once.
 */

const MODEL = 'Qwen/Qwen3-8B';
const servers: Server[] = [];
const readers: ModelWindowReader[] = [];

afterEach(async () => {
  await Promise.all(readers.splice(0).map((r) => r.stop()));
  for (const s of servers.splice(0)) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

async function serve(handle: (res: ServerResponse) => void): Promise<string> {
  const s = createServer((req, res) => (req.url === '/v1/models' ? handle(res) : res.writeHead(404).end()));
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/v1/models`;
}

const vllmList = (maxModelLen: number): string =>
  JSON.stringify({
    object: 'list',
    data: [
      { id: MODEL, object: 'model', root: MODEL, parent: null, max_model_len: maxModelLen, permission: [] },
      { id: 'sql-lora', object: 'model', root: '/loras/sql-lora', parent: MODEL, max_model_len: null },
    ],
  });

function reader(url: string, over: { intervalMs?: number; timeoutMs?: number } = {}) {
  const written: number[] = [];
  const lines: string[] = [];
  const r = new ModelWindowReader({
    url,
    model: MODEL,
    intervalMs: over.intervalMs ?? 60_000,
    timeoutMs: over.timeoutMs ?? 2000,
    log: createLogger('debug', (l) => lines.push(l)),
    write: (n) => written.push(n),
  });
  readers.push(r);
  return { r, written, lines };
}

describe('ModelWindowReader', () => {
  it("writes the model's max_model_len from a vLLM answer", async () => {
    const { r, written } = reader(await serve((res) => res.end(vllmList(40_960))));
    await r.readOnce();
    expect(written).toEqual([40_960]);
    expect(r.maxModelLen).toBe(40_960);
  });

  it('writes nothing for a pod without the endpoint, and logs it once', async () => {
    const url = await serve((res) => res.writeHead(404).end('{"detail":"Not Found"}'));
    const { r, written, lines } = reader(url);
    for (let i = 0; i < 3; i++) await r.readOnce();
    expect(written).toEqual([]);
    expect(r.maxModelLen).toBeNull();
    expect(lines.filter((l) => l.includes('HTTP 404'))).toHaveLength(1);
  });

  it('refuses a body over the bound, with or without a content-length, and reads nothing past it', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const chunked = await serve((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const more = (): void => {
        // An endless body: the reader must stop it, not buffer it.
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
        if (!res.destroyed) res.once('drain', more);
      };
      res.write('{"object":"list","data":[');
      more();
    });
    const a = reader(chunked);
    await a.r.readOnce();
    expect(a.written).toEqual([]);
    expect(a.lines.some((l) => l.includes(`over ${MODEL_LIST_MAX_BYTES} bytes`))).toBe(true);
    expect(sent).toBeLessThan(64 * MODEL_LIST_MAX_BYTES);

    const declared = await serve((res) => {
      res.writeHead(200, { 'content-length': String(MODEL_LIST_MAX_BYTES + 1) });
      res.write('{');
    });
    const b = reader(declared);
    await b.r.readOnce();
    expect(b.written).toEqual([]);
    expect(b.lines.some((l) => l.includes(`response of ${MODEL_LIST_MAX_BYTES + 1} bytes`))).toBe(true);
  });

  it('gives up on a server that never answers after timeoutMs, and on a closed port', async () => {
    const hung = reader(await serve(() => {}), { timeoutMs: 200 });
    const t = Date.now();
    await hung.r.readOnce();
    expect(Date.now() - t).toBeLessThan(5000);
    expect(hung.written).toEqual([]);
    expect(hung.lines.some((l) => l.includes('read failed'))).toBe(true);

    const closed = reader(`http://127.0.0.1:${await freePort()}/v1/models`);
    await closed.r.readOnce();
    expect(closed.written).toEqual([]);
  });

  it('writes nothing for a body that is not a model list', async () => {
    for (const body of ['not json', '[]', '{"data":[{"id":"x","max_model_len":"big"}]}']) {
      const { r, written } = reader(await serve((res) => res.end(body)));
      await r.readOnce();
      expect(written).toEqual([]);
    }
  });

  it('reads at start, then again at once after a restart (refresh) with the new window', async () => {
    let window = 8192;
    const { r, written } = reader(await serve((res) => res.end(vllmList(window))));
    r.start();
    await waitFor('first read', () => written.length === 1, 5000);
    window = 4096;
    r.refresh();
    await waitFor('read after the restart', () => written.at(-1) === 4096, 5000);
    expect(written).toEqual([8192, 4096]);
  });

  it('retries a pod that is not up yet, until it answers', async () => {
    const port = await freePort();
    const { r, written } = reader(`http://127.0.0.1:${port}/v1/models`, { intervalMs: 100 });
    r.start(); // refused until the server below listens
    const s = createServer((_req, res) => res.end(vllmList(2048)));
    servers.push(s);
    await new Promise<void>((ok) => s.listen(port, '127.0.0.1', ok));
    await waitFor('read once the pod is up', () => written.includes(2048), 10_000);
  });
});
