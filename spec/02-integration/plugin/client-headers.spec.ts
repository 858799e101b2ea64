import { request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway, type GatewayEvent } from '../../../kong/stand-in/index.js';
import type { BlockKey } from '../../../src/core/types.js';
import { MAX_GATEWAY_OWNED_HEADERS } from '../../../plugins/kinference/client-headers.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { waitFor } from '../../helpers/ports.js';
import { waitPluginWarm } from '../../helpers/plugin-warm-up.js';
import { startNamedUpstream, startSink, type Sink, type TestServer } from '../kong/test-servers.js';
import { decodeSpans } from '../telemetry/otlp.js';
import {
  buildPlugin,
  chatBody,
  keysFor,
  LONG_SYSTEM_PROMPT,
  seedIndex,
  SEEDED_INDEX_CONFIG,
  type BuiltPlugin,
} from './harness.js';

/**
 * A client cannot steer its routing or trust decisions (docs/security.md): client-sent x-data-parallel-rank
 * and x-kinference-* headers never reach a pod, whatever the plugin decided; too many of them are refused
 * before they cost a round trip each; and a forged, malformed or hostile traceparent/tracestate never breaks
 * routing nor is trusted beyond W3C Trace Context (no parent, no sampling, no tracestate carried into a new
 * trace). The real bundle in the real plugin server behind the stand-in, the index in a Redis of its own.
 */

const PREFIX = 'kinf-client-headers';
const MODEL = 'test-model';
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';
let redis: TestRedis;
let plugin: BuiltPlugin;
let gw: Gateway;
let fallback: TestServer;
let sink: Sink;
const pods: Record<string, TestServer> = {};
const events: GatewayEvent[] = [];
let keys: BlockKey[];

const body = chatBody(LONG_SYSTEM_PROMPT, 'What does rule 7 say?');

function route(name: string, config: Record<string, unknown>): Record<string, unknown> {
  return {
    name,
    paths: [`/${name}/v1/chat/completions`],
    methods: ['POST'],
    strip_path: true,
    plugins: [
      {
        name: 'kinference',
        config: {
          redis_url: redis.url,
          redis_key_prefix: PREFIX,
          tokenizer: 'tiktoken:o200k_base',
          chat_template: 'chatml',
          ...SEEDED_INDEX_CONFIG,
          ...config,
        },
      },
    ],
  };
}

interface Answer {
  status: number;
  requestId: string;
  json: Record<string, unknown>;
}

/** One POST with raw header values (an array is sent as several header lines, as a client may). */
function send(name: string, headers: OutgoingHttpHeaders = {}, payload: string = JSON.stringify(body)) {
  const u = new URL(`${gw.url}/${name}/v1/chat/completions`);
  return new Promise<Answer>((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown>;
          try {
            json = JSON.parse(text) as Record<string, unknown>;
          } catch {
            json = { text };
          }
          resolve({
            status: res.statusCode ?? 0,
            requestId: String(res.headers['x-kong-request-id']),
            json,
          });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

function accessSteps(a: Answer): string[] {
  const e = events.find((x) => x.requestId === a.requestId && x.phase === 'access');
  if (!e) throw new Error(`no access event for ${a.requestId}`);
  if (e.outcome.kind !== 'done') throw new Error(`event failed open: ${e.outcome.error}`);
  return e.outcome.result.steps.map((s) => s.method);
}

/** Headers the upstream that served `a` received. */
function received(a: Answer): Record<string, unknown> {
  const name = String(a.json.served_by);
  const server = name === 'fallback' ? fallback : pods[name]!;
  return server.requests.at(-1)!.headers;
}

const forged = {
  'x-data-parallel-rank': '1',
  'X-Kinference-Pod': 'pod-a',
  'x-kinference-cached-tokens': '999999',
  'x-kinference-tenant': 'someone-else',
};
const forgedNames = Object.keys(forged).map((k) => k.toLowerCase());

beforeAll(async () => {
  [redis, plugin, fallback, sink] = await Promise.all([
    startRedis(),
    buildPlugin(),
    startNamedUpstream('fallback'),
    startSink(),
  ]);
  for (const id of ['pod-a', 'pod-b']) pods[id] = await startNamedUpstream(id);
  keys = await keysFor(
    { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml', redis_url: redis.url },
    body,
  );
  await seedIndex(
    redis.url,
    PREFIX,
    MODEL,
    Object.entries(pods).map(([id, s]) => ({
      id,
      address: `127.0.0.1:${s.port}`,
      holds: id === 'pod-b' ? keys : [],
    })),
  );
  const otlp = `${sink.url}/v1/traces`;
  gw = await startGateway({
    kongConfig: {
      _format_version: '3.0',
      services: [
        {
          name: 'vllm',
          url: fallback.url,
          retries: 0,
          routes: [
            route('plain', {}),
            route('exposed', { expose_headers: true }),
            // Parent-based sampling with a root ratio of 0: only a valid sampled parent gets a span exported.
            route('traced', { otlp_endpoint: otlp, trace_sample_ratio: 0 }),
          ],
        },
      ],
    },
    port: 0,
    pluginsDir: plugin.dir,
    logger: process.env.KINF_TEST_LOG ? (l, m) => process.stderr.write(`[${l}] ${m}\n`) : () => undefined,
    onEvent: (e) => events.push(e),
  });
  // Every route routes on load (tokenizer_loading) until the shared tokenizer is loaded: wait for it.
  await waitPluginWarm(gw, { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml' });
  for (const name of ['plain', 'exposed', 'traced']) await send(name);
  await gw.idle();
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([
    redis?.stop(),
    fallback?.close(),
    sink?.close(),
    ...Object.values(pods).map((p) => p.close()),
  ]);
  plugin?.cleanup();
});

describe('client-sent gateway headers', () => {
  it('never reach the pod when the plugin chose no rank; one clear_header each, before set_target', async () => {
    const a = await send('plain', forged);
    expect(a.json).toMatchObject({ served_by: 'pod-b' }); // the forged pod does not steer routing
    const h = received(a);
    for (const n of forgedNames) expect(h[n], n).toBeUndefined();
    expect(accessSteps(a)).toEqual([
      'kong.request.get_headers',
      'kong.request.get_raw_body',
      ...forgedNames.map(() => 'kong.service.request.clear_header'),
      'kong.service.set_target',
      'kong.ctx.shared.set',
    ]);
  });

  it('cost nothing when absent: the access path is the usual 4 round trips', async () => {
    const a = await send('plain', { 'x-kinference': 'not ours (no dash)', 'x-data-parallel-size': '2' });
    expect(accessSteps(a)).toEqual([
      'kong.request.get_headers',
      'kong.request.get_raw_body',
      'kong.service.set_target',
      'kong.ctx.shared.set',
    ]);
    expect(received(a)['x-kinference']).toBe('not ours (no dash)');
  });

  it('with expose_headers the pod sees the plugin’s values only, and none the client invented', async () => {
    const a = await send('exposed', forged);
    expect(a.json).toMatchObject({ served_by: 'pod-b' });
    const h = received(a);
    expect(h['x-kinference-pod']).toBe('pod-b');
    expect(Number(h['x-kinference-cached-tokens'])).toBeLessThan(999999);
    expect(h['x-kinference-tenant']).toBeUndefined();
    expect(h['x-data-parallel-rank']).toBeUndefined();
  });

  it('are cleared on a fallback to Kong’s target too (a body that is not JSON)', async () => {
    const a = await send('plain', forged, '{not json');
    expect(a.json).toMatchObject({ served_by: 'fallback' });
    const h = received(a);
    for (const n of forgedNames) expect(h[n], n).toBeUndefined();
  });

  it('sent as several lines of one name are cleared with one call', async () => {
    const a = await send('plain', { 'x-data-parallel-rank': ['0', '1', '7'] });
    expect(received(a)['x-data-parallel-rank']).toBeUndefined();
    expect(accessSteps(a).filter((m) => m.endsWith('clear_header'))).toHaveLength(1);
  });

  it(`more than ${MAX_GATEWAY_OWNED_HEADERS} names are refused with a 400 naming them, before any routing`, async () => {
    const many: OutgoingHttpHeaders = {};
    for (let i = 0; i <= MAX_GATEWAY_OWNED_HEADERS; i++) many[`x-kinference-h${i}`] = String(i);
    const before = Object.values(pods).reduce((n, p) => n + p.requests.length, fallback.requests.length);
    const a = await send('plain', many);
    expect(a.status).toBe(400);
    expect(a.json).toMatchObject({ error: { code: 'gateway_headers_not_allowed' } });
    expect(String((a.json.error as { message: string }).message)).toContain('x-kinference-*');
    expect(accessSteps(a)).toEqual(['kong.request.get_headers', 'kong.response.exit']);
    expect(Object.values(pods).reduce((n, p) => n + p.requests.length, fallback.requests.length)).toBe(
      before,
    );
    // At the bound itself: served, every one cleared.
    const at: OutgoingHttpHeaders = {};
    for (let i = 0; i < MAX_GATEWAY_OWNED_HEADERS; i++) at[`x-kinference-h${i}`] = String(i);
    const ok = await send('plain', at);
    expect(ok.json).toMatchObject({ served_by: 'pod-b' });
    expect(Object.keys(received(ok)).filter((k) => k.startsWith('x-kinference-'))).toEqual([]);
  });
  // ≥ MAX_REQUEST_HEADERS lines (refused with a 431): spec/01-unit/plugin/client-headers.spec.ts; the stand-in's
  // Node server answers 400 itself at 1,000 header lines, before the plugin sees the request.
});

describe('forged trace context (tracing on, trace_sample_ratio 0)', () => {
  /** Sends on the traced route; returns what the pod got and the trace id of the upstream traceparent. */
  async function traced(headers: OutgoingHttpHeaders) {
    const a = await send('traced', headers);
    expect(a.status).toBe(200);
    expect(a.json).toMatchObject({ served_by: 'pod-b' }); // routing never breaks
    const h = received(a);
    const tp = String(h.traceparent);
    expect(tp).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    return { h, traceId: tp.split('-')[1]!, sampled: tp.endsWith('-01') };
  }

  const hostile: [string, OutgoingHttpHeaders][] = [
    ['version ff', { traceparent: `ff-${TRACE}-${PARENT}-01` }],
    ['all-zero trace id', { traceparent: `00-${'0'.repeat(32)}-${PARENT}-01` }],
    ['all-zero parent id', { traceparent: `00-${TRACE}-${'0'.repeat(16)}-01` }],
    ['upper-case hex', { traceparent: `00-${TRACE.toUpperCase()}-${PARENT}-01` }],
    ['version 00 with a fifth field', { traceparent: `00-${TRACE}-${PARENT}-01-extra` }],
    ['garbage', { traceparent: 'garbage' }],
    ['4 KB of it', { traceparent: `00-${TRACE}-${PARENT}-01`.padEnd(4096, 'x') }],
    ['two lines', { traceparent: [`00-${TRACE}-${PARENT}-01`, `00-${TRACE}-${PARENT}-01`] }],
    ['two values in one line', { traceparent: `00-${TRACE}-${PARENT}-01, 00-${TRACE}-${PARENT}-01` }],
  ];

  it.each(hostile)(
    '%s: routed, a new unsampled trace, and the client’s tracestate is not carried into it',
    async (_, headers) => {
      const r = await traced({ ...headers, tracestate: 'evil=1,vendor=2' });
      expect(r.traceId).not.toBe(TRACE);
      expect(r.sampled).toBe(false); // its sampled flag is not trusted: the root ratio (0) decides
      expect(r.h.tracestate).toBeUndefined();
    },
  );

  it('a valid parent is continued and its tracestate, even a huge one, passes through as sent', async () => {
    const huge = Array.from({ length: 200 }, (_, i) => `k${i}=${'v'.repeat(30)}`).join(',');
    const r = await traced({ traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: huge });
    expect(r.traceId).toBe(TRACE);
    expect(r.sampled).toBe(true);
    expect(r.h.tracestate).toBe(huge);
  });

  it('only the valid sampled parent was exported; no span carries a forged parent or the tracestate', async () => {
    // The valid parent's span is exported; spans end in order, so once it is in, any forged one would be too.
    await waitFor('the valid parent’s span', () =>
      decodeSpans(sink.bodies).find((s) => s.traceId === TRACE && s.parentSpanId === PARENT),
    );
    await gw.idle();
    const spans = decodeSpans(sink.bodies).filter((s) => s.name === 'kinference.route');
    expect(spans.map((s) => [s.traceId, s.parentSpanId])).toEqual([[TRACE, PARENT]]);
    expect(JSON.stringify(sink.bodies)).not.toContain('evil=1');
    expect(JSON.stringify(sink.bodies)).not.toContain('k199=');
  });
});
