import { waitPluginWarm } from '../../helpers/plugin-warm-up.js';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway, GatewayEvent } from '../../../kong/stand-in/index.js';
import type { BlockKey } from '../../../src/core/types.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import { waitFor } from '../../helpers/ports.js';
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
import { startGateway } from '../../../kong/stand-in/index.js';

/**
 * The bundled plugin in the real plugin server, driven by the stand-in: which PDK calls it makes on each
 * path (≤ 4 in access, 5 with expose_headers and tracing off, one more to ask a pod whose index was rebuilt
 * partially for reused-block reports), that it routes to the pod holding the prefix,
 * sheds only when asked, fails open, and fetches a body only when its headers say that is safe.
 */

const PREFIX = 'kinf-pdk';
const MODEL = 'test-model';
let redis: TestRedis;
let plugin: BuiltPlugin;
let gw: Gateway;
let fallback: TestServer;
const pods: Record<string, TestServer> = {};
let sink: Sink;
let faultOn: string | null = null;
const events: GatewayEvent[] = [];
const logLines: string[] = [];
let keys: BlockKey[];
/** nginx client_body_buffer_size for this gateway: bodies above it are spooled to a file, as in Kong. */
const BODY_BUFFER = 64 * 1024;

function baseConfig(): Record<string, unknown> {
  return {
    redis_url: redis.url,
    redis_key_prefix: PREFIX,
    tokenizer: 'tiktoken:o200k_base',
    chat_template: 'chatml',
    ...SEEDED_INDEX_CONFIG,
  };
}

function route(name: string, config: Record<string, unknown>): Record<string, unknown> {
  return {
    name,
    paths: [`/${name}/v1/chat/completions`],
    methods: ['POST'],
    strip_path: true,
    response_buffering: false,
    plugins: [{ name: 'kinference', config: { ...baseConfig(), ...config } }],
  };
}

const body = chatBody(LONG_SYSTEM_PROMPT, 'What does rule 7 say?');

async function send(
  name: string,
  payload: unknown = body,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${gw.url}/${name}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
}

/** PDK methods of the last `phase` event of the request answered with `res`. */
function methods(res: Response, phase: 'access' | 'log'): string[] {
  const id = res.headers.get('x-kong-request-id');
  const e = events.find((x) => x.requestId === id && x.phase === phase);
  if (!e) throw new Error(`no ${phase} event for ${id}`);
  if (e.outcome.kind !== 'done') throw new Error(`event failed open: ${e.outcome.error}`);
  return e.outcome.result.steps.map((s) => s.method);
}

beforeAll(async () => {
  [redis, plugin, fallback, sink] = await Promise.all([
    startRedis(),
    buildPlugin(),
    startNamedUpstream('fallback'),
    startSink(),
  ]);
  for (const id of ['pod-a', 'pod-b', 'pod-c']) pods[id] = await startNamedUpstream(id);
  keys = await keysFor(baseConfig(), body);
  await seedIndex(
    redis.url,
    PREFIX,
    MODEL,
    Object.entries(pods).map(([id, s]) => ({
      id,
      address: `127.0.0.1:${s.port}`,
      holds: id === 'pod-b' ? keys : [],
      // A queue on every pod (~3.3 s of prefill), so the shedding route has something worth waiting out.
      state: { waiting: 10, meanQueuedPrefillTokens: 1000 },
    })),
  );
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
            route('traced', { otlp_endpoint: `${sink.url}/v1/traces` }),
            route('shed', { shed_ttft_slo_ms: 1000 }),
            route('small-max', { max_body_bytes: 32768, expose_headers: true }),
            route('limited', {
              // The call sequence is the point, not the budget: a loaded machine must not fail it open.
              redis_timeout_ms: 2000,
              policies: {
                tenant_from: ['header'],
                rate_limits: [{ match: {}, limits: [{ tokens: 'prompt', window: 'day', limit: 1e9 }] }],
              },
            }),
          ],
        },
      ],
    },
    port: 0,
    pluginsDir: plugin.dir,
    clientBodyBufferBytes: BODY_BUFFER,
    logger: (l, m) => {
      logLines.push(`[${l}] ${m}`);
      if (process.env.KINF_TEST_LOG) process.stderr.write(`[${l}] ${m}\n`);
    },
    onEvent: (e) => events.push(e),
    injectStepError: (method, phase) => (phase === 'access' && method === faultOn ? 'injected fault' : null),
  });
  // Each route's config gets its own router; its first lookup also opens the Redis connection and loads the
  // script, which can exceed redis_timeout_ms (25 ms) and fall back by design. Warm each one up.
  // And every route routes on load (tokenizer_loading) until the shared tokenizer is loaded: wait for it.
  await waitPluginWarm(gw, baseConfig());
  for (const name of ['plain', 'exposed', 'traced', 'limited']) await send(name);
  await gw.idle();
  events.length = 0;
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

/** The x-kinference-fallback header the upstream that answered `res` received (expose_headers routes). */
function fallbackHeader(upstream: TestServer): unknown {
  return upstream.requests.at(-1)!.headers['x-kinference-fallback'];
}

/** A chat body padded to about `bytes` with a field the router ignores (same prompt, same block keys). */
function padded(bytes: number): string {
  return JSON.stringify({ ...body, metadata: 'x'.repeat(bytes) });
}

describe('kinference plugin PDK calls (real plugin server)', () => {
  it('the prompt spans many blocks, all held by pod-b', () => {
    expect(keys.length).toBeGreaterThan(20);
  });

  it('tracing off: get_headers → get_raw_body → set_target → ctx.shared.set (4), routed to the holder', async () => {
    const r = await send('plain');
    expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
    expect(methods(r, 'access')).toEqual([
      'kong.request.get_headers',
      'kong.request.get_raw_body',
      'kong.service.set_target',
      'kong.ctx.shared.set',
    ]);
    await gw.idle();
    expect(methods(r, 'log')).toEqual(['kong.log.serialize', 'kong.ctx.shared.get']);
  });

  it('a token limit: one response.set_headers carries the X-AI-RateLimit headers (5 round trips), the log settles', async () => {
    const r = await send('limited', body, { 'x-tenant-id': 'team-a' });
    expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
    expect(r.headers.get('x-ai-ratelimit-limit-86400-prompt')).toBe('1000000000');
    expect(methods(r, 'access')).toEqual([
      'kong.request.get_headers',
      'kong.request.get_raw_body',
      'kong.response.set_headers',
      'kong.service.set_target',
      'kong.ctx.shared.set',
    ]);
    await gw.idle();
    expect(methods(r, 'log')).toEqual(['kong.log.serialize', 'kong.ctx.shared.get']);
  });

  it('expose_headers: one set_headers call carries every x-kinference header (5 round trips)', async () => {
    const r = await send('exposed');
    expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
    expect(methods(r, 'access')).toEqual([
      'kong.request.get_headers',
      'kong.request.get_raw_body',
      'kong.service.set_target',
      'kong.service.request.set_headers',
      'kong.ctx.shared.set',
    ]);
    const h = pods['pod-b']!.requests.at(-1)!.headers;
    expect(h['x-kinference-pod']).toBe('pod-b');
    // vLLM recomputes the last prompt token, so at most ⌊(P−1)/16⌋·16 tokens count as cached.
    const promptTokens = Number(h['x-kinference-prompt-tokens']);
    expect(Number(h['x-kinference-cached-tokens'])).toBe(
      Math.min(keys.length * 16, Math.floor((promptTokens - 1) / 16) * 16),
    );
    expect(Number(h['x-kinference-predicted-ttft-ms'])).toBeGreaterThan(0);
    expect(h['x-kinference-fallback']).toBeUndefined();
  });

  it('tracing on: get_headers → get_raw_body → set_target → set_headers → ctx.shared.set (5), log needs 2', async () => {
    const incoming = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const r = await send('traced', body, { traceparent: incoming });
    expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
    expect(methods(r, 'access')).toEqual([
      'kong.request.get_headers',
      'kong.request.get_raw_body',
      'kong.service.set_target',
      'kong.service.request.set_headers',
      'kong.ctx.shared.set',
    ]);
    const tp = String(pods['pod-b']!.requests.at(-1)!.headers.traceparent);
    expect(tp).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    expect(tp).not.toContain('b7ad6b7169203331'); // our span is the upstream's parent
    await gw.idle();
    expect(methods(r, 'log')).toEqual(['kong.log.serialize', 'kong.ctx.shared.get']);
  });

  it('a pod rebuilt partially: set_raw_body adds vllm_xargs (5 round trips), the rest of the body as sent; a body with its own vllm_xargs is left alone', async () => {
    const mark = (partialSinceMs: number) =>
      seedIndex(redis.url, PREFIX, MODEL, [
        {
          id: 'pod-b',
          address: `127.0.0.1:${pods['pod-b']!.port}`,
          state: { waiting: 10, meanQueuedPrefillTokens: 1000, partialSinceMs },
        },
      ]);
    await mark(Date.now() - 1000);
    try {
      const sent = JSON.stringify(body);
      const r = await send('plain', sent);
      expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
      expect(methods(r, 'access')).toEqual([
        'kong.request.get_headers',
        'kong.request.get_raw_body',
        'kong.service.set_target',
        'kong.service.request.set_raw_body',
        'kong.ctx.shared.set',
      ]);
      const got = pods['pod-b']!.requests.at(-1)!;
      const member = '"vllm_xargs":{"kv_cache_report_mode":"full"},';
      expect(got.body.toString('utf8')).toBe(`{${member}${sent.slice(1)}`);
      expect(Number(got.headers['content-length'])).toBe(Buffer.byteLength(sent) + member.length);

      const own = JSON.stringify({ ...body, vllm_xargs: { kv_cache_report_mode: 'incremental' } });
      const r2 = await send('plain', own);
      expect(await r2.json()).toMatchObject({ served_by: 'pod-b' });
      expect(methods(r2, 'access')).not.toContain('kong.service.request.set_raw_body');
      expect(pods['pod-b']!.requests.at(-1)!.body.toString('utf8')).toBe(own);
    } finally {
      await mark(0);
    }
  });

  it('shedding (opt-in): get_headers → get_raw_body → response.exit(429) with Retry-After; nothing after exit', async () => {
    const before = Object.values(pods).reduce((n, p) => n + p.requests.length, fallback.requests.length);
    const r = await send('shed');
    expect(r.status).toBe(429);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await r.json()).toMatchObject({ error: { code: 'ttft_slo_exceeded' } });
    expect(methods(r, 'access')).toEqual([
      'kong.request.get_headers',
      'kong.request.get_raw_body',
      'kong.response.exit',
    ]);
    expect(Object.values(pods).reduce((n, p) => n + p.requests.length, fallback.requests.length)).toBe(
      before,
    );
  });

  it('a body that is not JSON leaves Kong’s target: the service url answers', async () => {
    const r = await send('plain', '{not json');
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ served_by: 'fallback' });
    expect(methods(r, 'access')).toEqual(['kong.request.get_headers', 'kong.request.get_raw_body']);
  });

  it('an exception inside the plugin (a PDK call rejects) fails open to the service url', async () => {
    faultOn = 'kong.service.set_target';
    try {
      const r = await send('plain');
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({ served_by: 'fallback' });
      expect(methods(r, 'access')).toEqual([
        'kong.request.get_headers',
        'kong.request.get_raw_body',
        'kong.service.set_target',
      ]);
    } finally {
      faultOn = null;
    }
  });

  it('a set_target that rejects leaves no reservation behind on the pod the request never reached', async () => {
    const predicted = async (): Promise<number> => {
      const r = await send('exposed');
      expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
      await gw.idle(); // its log phase has released its own reservation
      return Number(pods['pod-b']!.requests.at(-1)!.headers['x-kinference-predicted-ttft-ms']);
    };
    const before = await predicted();
    faultOn = 'kong.service.set_target';
    try {
      for (let i = 0; i < 4; i++)
        expect(await (await send('exposed')).json()).toMatchObject({ served_by: 'fallback' });
    } finally {
      faultOn = null;
    }
    await gw.idle();
    expect(await predicted()).toBe(before);
  });

  it('tracing on: a PDK call that rejects marks the span failed, with Kong’s target, not the pod', async () => {
    const trace = '0af7651916cd43dd8448eb211c8031ee';
    faultOn = 'kong.service.set_target';
    try {
      const r = await send('traced', body, { traceparent: `00-${trace}-b7ad6b7169203331-01` });
      expect(await r.json()).toMatchObject({ served_by: 'fallback' });
    } finally {
      faultOn = null;
    }
    const route = await waitFor('route span', () =>
      decodeSpans(sink.bodies).find((s) => s.traceId === trace && s.name === 'kinference.route'),
    );
    expect(route.status.code).toBe(2); // STATUS_CODE_ERROR
    expect(route.status.message).toContain('injected fault');
    expect(route.attributes['kinference.plugin.error']).toContain('injected fault');
    expect(route.attributes['kinference.target']).toBe('kong-default');
    expect(route.events.map((e) => e.name)).toContain('exception');
  });

  it('a body over max_body_bytes and over client_body_buffer_size is never fetched: no 500, Kong’s target', async () => {
    const r = await send('small-max', padded(250_000));
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ served_by: 'fallback' });
    expect(methods(r, 'access')).toEqual(['kong.request.get_headers', 'kong.service.request.set_headers']);
    expect(fallbackHeader(fallback)).toBe('body_too_large');
  });

  it('a body within max_body_bytes that nginx spooled to a file is read from it and routed', async () => {
    const big = padded(2 * BODY_BUFFER);
    expect(big.length).toBeGreaterThan(BODY_BUFFER);
    const r = await send('plain', big);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
    const e = events.filter((x) => x.phase === 'access').at(-1)!;
    expect(e.outcome.kind === 'done' && e.outcome.result.steps[1]).toMatchObject({
      method: 'kong.request.get_raw_body',
      args: [8388608],
    });
  });

  it('reads past Kong’s default 100 headers: a Content-Length sent after 150 others still routes', async () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 150; i++) many[`x-proxy-${i}`] = String(i);
    const r = await send('plain', body, many); // fetch adds content-length after these
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ served_by: 'pod-b' });
    const e = events.filter((x) => x.phase === 'access').at(-1)!;
    expect(e.outcome.kind === 'done' && e.outcome.result.steps[0]).toMatchObject({
      method: 'kong.request.get_headers',
      args: [1000],
    });
  });

  it('compressed, empty and chunked bodies are not fetched, each with its own reason', async () => {
    const gz = await fetch(`${gw.url}/exposed/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify(body)),
    });
    expect(await gz.json()).toMatchObject({ served_by: 'fallback' });
    expect(methods(gz, 'access')).toEqual(['kong.request.get_headers', 'kong.service.request.set_headers']);
    expect(fallbackHeader(fallback)).toBe('body_compressed');

    const empty = await send('exposed', '');
    expect(await empty.json()).toMatchObject({ served_by: 'fallback' });
    expect(fallbackHeader(fallback)).toBe('body_empty');

    const bytes = new TextEncoder().encode(JSON.stringify(body));
    const chunked = await fetch(`${gw.url}/exposed/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new ReadableStream({
        start(c) {
          c.enqueue(bytes);
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(await chunked.json()).toMatchObject({ served_by: 'fallback' });
    expect(methods(chunked, 'access')).toEqual([
      'kong.request.get_headers',
      'kong.service.request.set_headers',
    ]);
    expect(fallbackHeader(fallback)).toBe('body_length_unknown');
  });

  it('each fallback reason reaches Kong’s log once, via kong.log.warn in the log phase, without the body', async () => {
    await send('plain', '{not json, "secret": "do not log me"');
    await gw.idle();
    await send('plain', '{not json either');
    await gw.idle();
    const lines = logLines.filter((l) => l.includes('fallback body_not_json'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\[warn\] \[kinference\] fallback body_not_json, request sent to Kong's target/,
    );
    expect(logLines.join('\n')).not.toContain('do not log me');
    expect(
      logLines.some((l) => l.includes('fallback body_too_large') && l.includes('max_body_bytes 32768')),
    ).toBe(true);
  });

  it('every access path stays within 5 PDK round trips', async () => {
    await waitFor('events recorded', () => events.length > 0);
    for (const e of events.filter((x) => x.phase === 'access' && x.outcome.kind === 'done'))
      if (e.outcome.kind === 'done') expect(e.outcome.result.steps.length).toBeLessThanOrEqual(5);
  });
});
