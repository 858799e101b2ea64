import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startGateway,
  jsPluginServerDef,
  type Gateway,
  type GatewayEvent,
} from '../../../kong/stand-in/index.js';
import { waitFor } from '../../helpers/ports.js';
import {
  startNamedUpstream,
  startServer,
  startSink,
  startSseUpstream,
  type Sink,
  type SseUpstream,
  type TestServer,
} from './test-servers.js';

/**
 * The stand-in against the REAL kong-js-pluginserver with a fixture plugin (spec/fixtures/kong/plugins/probe):
 * Kong's side of the protocol, config processing, PDK semantics, fail-open, exit, streaming, respawn.
 */

const PROBE_DIR = join(import.meta.dirname, '../../fixtures/kong/plugins/probe');

let prefix: string;
let gw: Gateway;
let main: TestServer;
let other: TestServer;
let sse: SseUpstream;
let sink: Sink;
const events: GatewayEvent[] = [];

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(gw.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function lastAccess(): GatewayEvent {
  const e = events.filter((x) => x.phase === 'access').at(-1);
  if (!e) throw new Error('no access event');
  return e;
}

beforeAll(async () => {
  [main, other, sse, sink] = await Promise.all([
    startNamedUpstream('main'),
    startNamedUpstream('other'),
    startSseUpstream('sse', { hold: true }),
    startSink(),
  ]);
  prefix = mkdtempSync(join(tmpdir(), 'kinf-probe-'));
  gw = await startGateway({
    kongConfig: {
      _format_version: '3.0',
      services: [
        {
          name: 'main',
          url: main.url,
          retries: 0,
          routes: [
            {
              name: 'probe',
              paths: ['/probe'],
              methods: ['POST'],
              strip_path: false,
              plugins: [{ name: 'probe', config: { report_url: `${sink.url}/report`, limit: 7 } }],
            },
            { name: 'plain', paths: ['/plain'], strip_path: true },
            {
              name: 'preserve',
              paths: ['/preserve'],
              preserve_host: true,
              plugins: [{ name: 'probe', config: {} }],
            },
          ],
        },
        {
          name: 'stream',
          url: `${sse.url}/v1`,
          routes: [
            { name: 'sse', paths: ['/sse'], response_buffering: false },
            { name: 'sse-buffered', paths: ['/sse-buffered'] }, // Kong's default: response_buffering on
          ],
        },
        { name: 'dead', url: 'http://127.0.0.1:1', retries: 1, routes: [{ name: 'dead', paths: ['/dead'] }] },
      ],
      plugins: [
        { name: 'probe', service: 'stream', config: {} },
        { name: 'file-log', config: { path: join(prefix, 'access.log') } },
      ],
    },
    port: 0,
    pluginServers: [jsPluginServerDef('probe', PROBE_DIR, prefix)],
    logger: process.env.KINF_TEST_LOG ? (l, m) => process.stderr.write(`[${l}] ${m}\n`) : () => undefined,
    onEvent: (e) => events.push(e),
  });
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([main?.close(), other?.close(), sse?.close(), sink?.close()]);
  rmSync(prefix, { recursive: true, force: true });
});

describe('Kong stand-in with the real plugin server', () => {
  it('registers the plugin from the query command and sends Kong-processed config', async () => {
    const info = gw.plugins.get('probe')!.info;
    expect(info).toMatchObject({
      Name: 'probe',
      Version: '1.2.3',
      Priority: 1000,
      Phases: ['log', 'access'],
    });
    const r = await post('/probe', { echoConfig: true });
    expect(r.status).toBe(200);
    const config = JSON.parse(String(main.requests.at(-1)!.headers['x-probe-config'])) as Record<
      string,
      unknown
    >;
    // defaults filled, the user's value kept, Kong's bookkeeping keys present
    expect(config).toMatchObject({ mode: 'normal', limit: 7, report_url: `${sink.url}/report` });
    expect(config.route_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(config.__plugin_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(config).toHaveProperty('__ws_id');
    expect(config).toHaveProperty('__key__');
    expect(typeof config.__seq__).toBe('number');
    expect(config).not.toHaveProperty('service_id'); // nil in Lua → absent from cjson
    // DAO:cache_key(name, route, service, consumer, nil, ws): seven fields
    expect(config.__key__).toBe(`plugins:probe:${String(config.route_id)}::::${String(config.__ws_id)}`);
  });

  it('leaves unset optional fields out of the config (Kong reads plugins back without nulls)', async () => {
    await fetch(`${gw.url}/sse`, { method: 'POST', body: JSON.stringify({ echoConfig: true }) });
    const cfg = JSON.parse(String(sse.requests.at(-1)!.headers['x-probe-config'])) as Record<string, unknown>;
    expect(cfg).not.toHaveProperty('report_url');
    expect(cfg).toMatchObject({ mode: 'normal', limit: 5 });
  });

  it('delivers the raw body as a Uint8Array (msgpack bin) and proxies it unchanged', async () => {
    const payload = { bodyType: true, pad: 'é'.repeat(3000) };
    const r = await post('/probe', payload);
    expect(r.status).toBe(200);
    const got = main.requests.at(-1)!;
    expect(got.headers['x-probe-body-type']).toBe(`[object Uint8Array]:${JSON.stringify(payload).length}`);
    expect(JSON.parse(got.body.toString('utf8'))).toEqual(payload);
  });

  it('set_target sends the request to the target, with the bare target host as Host (kong.md §7 #15)', async () => {
    const r = await post('/probe', { target: { host: '127.0.0.1', port: other.port } });
    expect(await r.json()).toMatchObject({ served_by: 'other', path: '/probe' });
    const got = other.requests.at(-1)!;
    expect(got.headers.host).toBe('127.0.0.1');
    expect(got.headers['x-forwarded-path']).toBe('/probe');
    expect(got.headers['x-kong-request-id']).toMatch(/^[0-9a-f]{32}$/);
    expect(lastAccess().outcome).toMatchObject({ kind: 'done', result: { end: 'ret' } });
    const steps = (lastAccess().outcome as { result: { steps: { method: string }[] } }).result.steps;
    expect(steps.map((s) => s.method)).toEqual(['kong.request.get_raw_body', 'kong.service.set_target']);
  });

  it('the Host sent is $upstream_host: set_target overrides preserve_host, clear_header leaves it', async () => {
    const routed = await post('/preserve', { target: { host: '127.0.0.1', port: other.port } });
    expect(await routed.json()).toMatchObject({ served_by: 'other' });
    expect(other.requests.at(-1)!.headers.host).toBe('127.0.0.1');
    await post('/preserve', {});
    expect(main.requests.at(-1)!.headers.host).toBe(new URL(gw.url).host); // the client's, port and all
  });

  it('header values in an array must be strings, as Kong’s validate_headers wants: else 500', async () => {
    expect((await post('/probe', { headers: { 'x-a': ['1', '2'] } })).status).toBe(200);
    expect(main.requests.at(-1)!.headers['x-a']).toBe('1, 2');
    expect((await post('/probe', { headers: { 'x-a': 3 } })).status).toBe(200);
    const r = await post('/probe', { headers: { 'x-a': [1] } });
    expect(r.status).toBe(500);
    expect((lastAccess().outcome as { result: { error: string } }).result.error).toMatch(
      /invalid header value in array "x-a": got number/,
    );
  });

  it('in the log timer, PDK calls that read the live request raise; saved data still answers', async () => {
    const logOf = async (shared: unknown): Promise<GatewayEvent['outcome']> => {
      const r = await post('/probe', { shared });
      const id = r.headers.get('x-kong-request-id');
      await gw.idle();
      const e = events.find((x) => x.phase === 'log' && x.requestId === id);
      if (!e) throw new Error('no log event');
      return e.outcome;
    };
    for (const call of ['request.getPath', 'request.getMethod', 'nginx.getVar', 'client.getIp'])
      expect(await logOf({ logCall: call, logArgs: call === 'nginx.getVar' ? ['uri'] : [] })).toMatchObject({
        kind: 'done',
        result: { end: 'pdk_error', error: expect.stringMatching(/ngx\.timer/) as unknown },
      });
    for (const call of ['request.getHeader', 'response.getStatus', 'request.getHeaders'])
      expect(
        await logOf({ logCall: call, logArgs: call === 'request.getHeaders' ? [5000] : ['host'] }),
      ).toMatchObject({
        kind: 'done',
        result: { end: 'ret' },
      });
  });

  it('answers get_headers through StepMultiMap with every value an array', async () => {
    await post(
      '/probe',
      { getHeaders: true, getHeader: 'X-Custom', missingHeader: true },
      { 'x-custom': 'v1' },
    );
    const got = main.requests.at(-1)!;
    const headers = JSON.parse(String(got.headers['x-probe-headers'])) as Record<string, unknown>;
    expect(headers['x-custom']).toEqual(['v1']);
    expect(headers['content-type']).toEqual(['application/json']);
    expect(got.headers['x-probe-header']).toBe('v1');
    expect(got.headers['x-probe-missing']).toBe('undefined'); // nil → no Data key → undefined in JS
  });

  it('get_headers reads the first 100 header lines unless told more (up to 1000), like Kong', async () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 120; i++) many[`x-h${String(i).padStart(3, '0')}`] = String(i);
    const seen = async (cmd: unknown): Promise<Record<string, unknown>> => {
      await post('/probe', cmd, many);
      return JSON.parse(String(main.requests.at(-1)!.headers['x-probe-headers'])) as Record<string, unknown>;
    };
    const dflt = await seen({ getHeaders: true });
    expect(Object.keys(dflt)).toHaveLength(100);
    expect(dflt['x-h000']).toEqual(['0']);
    expect(dflt['x-h119']).toBeUndefined();
    const all = await seen({ getHeaders: 1000 });
    expect(all['x-h119']).toEqual(['119']);
    expect(all['content-length']).toBeDefined();
    // get_header searches the same first 100 lines.
    await post('/probe', { getHeader: 'x-h119' }, many);
    expect(main.requests.at(-1)!.headers['x-probe-header']).toBe('undefined');
    const bad = await post('/probe', { getHeaders: 1001 });
    expect(bad.status).toBe(500);
  });

  it('kong.response.exit answers the client and is never stepped again', async () => {
    const before = main.requests.length;
    const r = await post('/probe', {
      exit: { status: 429, body: '{"error":"slow down"}', headers: { 'Retry-After': '3' } },
    });
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('3');
    expect(await r.text()).toBe('{"error":"slow down"}');
    expect(main.requests.length).toBe(before);
    const res = (lastAccess().outcome as { result: { end: string; steps: { method: string }[] } }).result;
    expect(res.end).toBe('exit');
    expect(res.steps.at(-1)!.method).toBe('kong.response.exit');
  });

  it('an exception in the plugin fails open: the upstream answers', async () => {
    const r = await post('/probe', { throw: true });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ served_by: 'main' });
  });

  it('a PDK call with bad arguments is a Lua error: 500, like Kong', async () => {
    const r = await post('/probe', { badTarget: true });
    expect(r.status).toBe(500);
    expect(await r.json()).toMatchObject({ message: 'An unexpected error occurred' });
    expect((lastAccess().outcome as { result: { end: string } }).result.end).toBe('pdk_error');
  });

  it('runs the log phase after the response with serialize() as a JSON string and ctx.shared kept', async () => {
    await gw.idle(); // earlier requests' log phases report too
    const n = sink.bodies.length;
    await post('/probe', { shared: { pod: 'a', n: 3 } });
    await waitFor('log report', () => sink.bodies.length > n);
    await gw.idle();
    expect(sink.bodies.length).toBe(n + 1);
    const rep = sink.bodies.at(-1) as {
      serializedType: string;
      shared: unknown;
      serialized: {
        latencies: Record<string, number>;
        tries: { ip: string; port: number }[];
        response: { status: number };
      };
    };
    expect(rep.serializedType).toBe('string');
    expect(rep.shared).toEqual({ pod: 'a', n: 3 });
    expect(Object.keys(rep.serialized.latencies).sort()).toEqual(['kong', 'proxy', 'receive', 'request']);
    expect(rep.serialized.latencies.proxy).toBeGreaterThanOrEqual(0);
    expect(rep.serialized.tries).toEqual([expect.objectContaining({ ip: '127.0.0.1', port: main.port })]);
    expect(rep.serialized.response.status).toBe(200);
  });

  it('a query string with malformed escapes keeps its log phase and file-log line (serialize never throws)', async () => {
    await gw.idle();
    const n = sink.bodies.length;
    const res = await post('/probe?a=%ff%fe&b=%00&c=x%zz&d=1=2&e&e=&=v&f=%4', {});
    expect(res.status).toBe(200);
    const id = res.headers.get('x-kong-request-id');
    await waitFor('log report', () => sink.bodies.length > n);
    await gw.idle();
    const rep = sink.bodies.at(-1) as {
      serialized: { request: { id: string; querystring: unknown; uri: string } };
    };
    // ngx.req.get_uri_args: decodable bytes decoded (0xff 0xfe are no UTF-8: U+FFFD on the plugin's side),
    // a bad escape kept as sent, split at the first `=`, an empty key dropped, repeats gathered.
    const querystring = { a: '\ufffd\ufffd', b: '\u0000', c: 'x%zz', d: '1=2', e: [true, ''], f: '%4' };
    expect(rep.serialized.request).toMatchObject({
      id,
      uri: '/probe?a=%ff%fe&b=%00&c=x%zz&d=1=2&e&e=&=v&f=%4',
      querystring,
    });
    const line = readFileSync(join(prefix, 'access.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { request: { id: string; querystring: unknown } })
      .find((e) => e.request.id === id);
    expect(line?.request.querystring).toEqual(querystring);
  });

  it('holds the stream on a route with response_buffering on (Kong’s default) until a buffer fills or it ends', async () => {
    const r = await fetch(`${gw.url}/sse-buffered/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ stream: true, model: 'm' }),
    });
    expect(r.status).toBe(200); // headers are not held
    const reader = r.body!.getReader();
    const first = reader.read();
    // The upstream has sent its first ~400 bytes and holds: under nginx's buffering none reach the client.
    const early = await Promise.race([first, new Promise((res) => setTimeout(() => res('held'), 300))]);
    expect(early).toBe('held');
    sse.release(); // the upstream ends: everything arrives at once
    sse.hold();
    let all = new TextDecoder().decode((await first).value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      all += new TextDecoder().decode(value);
    }
    expect(all).toContain('"role":"assistant"');
    expect(all).toContain('data: [DONE]');
  });

  it('streams SSE through without buffering: the first event arrives while the upstream still holds', async () => {
    const before = sse.requests.length;
    const r = await fetch(`${gw.url}/sse/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ stream: true, model: 'm' }),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const reader = r.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('"role":"assistant"');
    expect(sse.requests.length).toBe(before + 1);
    expect(sse.requests.at(-1)!.url).toBe('/v1/chat/completions'); // service path + stripped route path
    sse.release(); // only now may the upstream finish
    let rest = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toContain('data: [DONE]');
  });

  it('answers Kong errors: 404 without a route, 502 when the upstream is down (after retries)', async () => {
    expect((await fetch(`${gw.url}/nowhere`)).status).toBe(404);
    const r = await fetch(`${gw.url}/dead`);
    expect(r.status).toBe(502);
    expect(await r.json()).toMatchObject({
      message: 'An invalid response was received from the upstream server',
    });
  });

  it('serialize() shows nginx’s upstream_status for every try and Kong’s try states', async () => {
    const entryFor = async (r: Response): Promise<Record<string, unknown>> => {
      const id = r.headers.get('x-kong-request-id');
      await gw.idle();
      const lines = readFileSync(join(prefix, 'access.log'), 'utf8').trim().split('\n');
      const e = lines
        .map((l) => JSON.parse(l) as { request: { id: string } })
        .find((x) => x.request.id === id);
      if (!e) throw new Error(`no file-log line for ${String(id)}`);
      return e as unknown as Record<string, unknown>;
    };
    // refused twice (retries: 1): the retry records the first failure, header_filter the last
    const dead = await entryFor(await fetch(`${gw.url}/dead`));
    expect(dead.upstream_status).toBe('502, 502');
    expect(dead.tries).toEqual([
      expect.objectContaining({ ip: '127.0.0.1', port: 1, state: 'failed', code: 502 }),
      expect.objectContaining({ ip: '127.0.0.1', port: 1, state: 'failed', code: 502 }),
    ]);
    const ok = await entryFor(await post('/plain/x', {}));
    expect(ok.upstream_status).toBe('200');
    expect((ok.tries as Record<string, unknown>[])[0]).not.toHaveProperty('state');
    // never proxied: no try, and Kong's serializer still has the field, empty
    const exit = await entryFor(await post('/probe', { exit: { status: 403, body: 'no' } }));
    expect(exit.upstream_status).toBe('');
    expect(exit.tries).toEqual([]);
  });

  it('marks the last try failed for a 5xx answer only when no retry was left (Kong’s header_filter)', async () => {
    const failing = await startServer((_req, res) => {
      res.writeHead(503, { 'content-length': '0' });
      res.end();
    });
    const p2 = mkdtempSync(join(tmpdir(), 'kinf-tries-'));
    const g = await startGateway({
      kongConfig: {
        _format_version: '3.0',
        services: [
          { name: 'r0', url: failing.url, retries: 0, routes: [{ paths: ['/r0'] }] },
          { name: 'r2', url: failing.url, retries: 2, routes: [{ paths: ['/r2'] }] },
        ],
        plugins: [{ name: 'file-log', config: { path: join(p2, 'access.log') } }],
      },
      port: 0,
      pluginServers: [],
      logger: () => undefined,
    });
    try {
      for (const path of ['/r0', '/r2']) expect((await fetch(g.url + path)).status).toBe(503);
      await g.idle();
      const [r0, r2] = readFileSync(join(p2, 'access.log'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { upstream_status: string; tries: Record<string, unknown>[] });
      expect(r0!.upstream_status).toBe('503');
      expect(r0!.tries).toEqual([expect.objectContaining({ state: 'failed', code: 503 })]);
      expect(r2!.upstream_status).toBe('503'); // an HTTP answer is not retried (proxy_next_upstream error timeout)
      expect(r2!.tries).toHaveLength(1);
      expect(r2!.tries[0]).not.toHaveProperty('state');
    } finally {
      await g.close();
      await failing.close();
      rmSync(p2, { recursive: true, force: true });
    }
  });

  it('strip_path and the service path build the upstream URI', async () => {
    await fetch(`${gw.url}/plain/a/b?x=1`);
    expect(main.requests.at(-1)!.url).toBe('/a/b?x=1');
  });

  it('fails open while the plugin server is down, and routes again after the respawn', async () => {
    const proc = gw.plugins.get('probe')!.server;
    const spawnsBefore = proc.spawns;
    await proc.kill('SIGKILL');
    // The server is gone: the cached instance's HandleEvent fails to connect → logged, request proxied.
    const during = await post('/probe', { target: { host: '127.0.0.1', port: other.port } });
    expect(during.status).toBe(200);
    expect(await during.json()).toMatchObject({ served_by: 'main' });
    expect(lastAccess().outcome.kind).toBe('failed_open');
    await waitFor('respawn', () => proc.spawns > spawnsBefore, 5000);
    await gw.pluginServersReady(5000);
    // New server: "no plugin instance" → reset, StartInstance, retry once → routed again.
    const after = await post('/probe', { target: { host: '127.0.0.1', port: other.port } });
    expect(await after.json()).toMatchObject({ served_by: 'other' });
  });

  it('a body larger than client_body_buffer_size makes get_raw_body fail: 500, as in Kong', async () => {
    const p2 = mkdtempSync(join(tmpdir(), 'kinf-probe-buf-'));
    const small = await startGateway({
      kongConfig: {
        _format_version: '3.0',
        services: [{ name: 's', url: main.url, routes: [{ paths: ['/x'], plugins: [{ name: 'probe' }] }] }],
      },
      port: 0,
      clientBodyBufferBytes: 1024,
      pluginServers: [jsPluginServerDef('probe', PROBE_DIR, p2)],
      logger: () => undefined,
    });
    try {
      const ok = await fetch(`${small.url}/x`, {
        method: 'POST',
        body: JSON.stringify({ pad: 'x'.repeat(500) }),
      });
      expect(ok.status).toBe(200);
      const big = await fetch(`${small.url}/x`, {
        method: 'POST',
        body: JSON.stringify({ pad: 'x'.repeat(2000) }),
      });
      expect(big.status).toBe(500);
    } finally {
      await small.close();
      rmSync(p2, { recursive: true, force: true });
    }
  });

  it('like Kong, answers 500 when no instance is cached and StartInstance cannot reach the server', async () => {
    const p2 = mkdtempSync(join(tmpdir(), 'kinf-probe-start-'));
    const gw2 = await startGateway({
      kongConfig: {
        _format_version: '3.0',
        services: [{ name: 's', url: main.url, routes: [{ paths: ['/x'], plugins: [{ name: 'probe' }] }] }],
      },
      port: 0,
      pluginServers: [jsPluginServerDef('probe', PROBE_DIR, p2)],
      logger: () => undefined,
    });
    try {
      const proc = gw2.plugins.get('probe')!.server;
      await proc.kill('SIGKILL'); // before any request: no instance cached yet
      const r = await fetch(`${gw2.url}/x`, { method: 'POST', body: '{}' });
      expect(r.status).toBe(500); // get_instance_id raises in Kong (kong.md §2.3)
      await gw2.pluginServersReady(10_000);
      expect((await fetch(`${gw2.url}/x`, { method: 'POST', body: '{}' })).status).toBe(200);
    } finally {
      await gw2.close();
      rmSync(p2, { recursive: true, force: true });
    }
  });

  it('runs Kong’s bundled file-log: one serialize() JSON line per request, with the upstream tried', async () => {
    const res = await post('/plain/x', { a: 1 });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-kong-request-id');
    await gw.idle();
    const lines = readFileSync(join(prefix, 'access.log'), 'utf8').trim().split('\n');
    const entry = lines
      .map((l) => JSON.parse(l) as { request: { id: string } })
      .find((e) => e.request.id === id);
    expect(entry).toMatchObject({
      request: { method: 'POST', uri: '/plain/x' },
      route: { name: 'plain' },
      service: { name: 'main' },
      upstream_uri: '/x',
      response: { status: 200 },
      tries: [expect.objectContaining({ ip: '127.0.0.1', port: main.port })],
    });
  });

  it('refuses a file-log config Kong would refuse, and custom_fields_by_lua (it needs Lua)', async () => {
    for (const [config, err] of [
      [{}, /config\.path: required field missing/],
      [{ path: '/tmp/a*b' }, /config\.path: not a valid filename/],
      [{ path: '/tmp/x.log', custom_fields_by_lua: { a: 'return 1' } }, /custom_fields_by_lua needs/],
    ] as const)
      await expect(
        startGateway({
          kongConfig: {
            _format_version: '3.0',
            services: [{ name: 's', url: main.url, routes: [{ paths: ['/x'] }] }],
            plugins: [{ name: 'file-log', config }],
          },
          port: 0,
          pluginServers: [],
          logger: () => undefined,
        }),
      ).rejects.toThrow(err);
  });

  it('rejects an invalid plugin config at start, with Kong-style field errors', async () => {
    const p2 = mkdtempSync(join(tmpdir(), 'kinf-probe-bad-'));
    try {
      await expect(
        startGateway({
          kongConfig: {
            _format_version: '3.0',
            services: [{ name: 's', url: main.url, routes: [{ paths: ['/x'] }] }],
            plugins: [{ name: 'probe', config: { mode: 'loose', limit: 11, extra: 1 } }],
          },
          port: 0,
          pluginServers: [jsPluginServerDef('probe', PROBE_DIR, p2)],
          logger: () => undefined,
        }),
      ).rejects.toThrow(
        /config\.mode: expected one of: normal, strict[\s\S]*config\.limit: value should be between 1 and 10[\s\S]*config\.extra: unknown field/,
      );
    } finally {
      rmSync(p2, { recursive: true, force: true });
    }
  });
});

describe('upstream helpers', () => {
  it('startServer captures requests', async () => {
    const s = await startServer((_req, res) => void res.end('ok'));
    try {
      await fetch(s.url + '/z', { method: 'PUT', body: 'b' });
      expect(s.requests[0]).toMatchObject({ method: 'PUT', url: '/z' });
    } finally {
      await s.close();
    }
  });
});
