import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../../kong/stand-in/index.js';
import { SPAN_ROUTE, SPAN_TTFT } from '../../../src/telemetry/attributes.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';
import {
  buildPlugin,
  chatBody,
  CHAT_PATH,
  keysFor,
  LONG_SYSTEM_PROMPT,
  seedIndex,
  SEEDED_INDEX_CONFIG,
  startPluginGateway,
  type BuiltPlugin,
} from '../plugin/harness.js';
import {
  startNamedUpstream,
  startServer,
  startSink,
  startSseUpstream,
  type Sink,
  type SseUpstream,
  type TestServer,
} from '../kong/test-servers.js';
import { decodeSpans, type DecodedSpan } from './otlp.js';

/**
 * Tracing end to end: the plugin, inside the real plugin server, exports its decision over OTLP/HTTP to a
 * real receiver; the span is a child of the client's traceparent; the pod receives a traceparent whose
 * parent is our span (so vLLM's spans join the trace); the log phase adds the measured TTFT as a child span.
 */

const PREFIX = 'kinf-otel';
let redis: TestRedis;
let plugin: BuiltPlugin;
let gw: Gateway;
let sink: Sink;
let fallback: TestServer;
/** The only pod of SICK_MODEL: answers every request 503, as an overloaded vLLM does. */
let sick: TestServer;
const SICK_MODEL = 'sick-model';
/** The only pod of DEAD_MODEL: nothing listens on its port (a crashed vLLM). */
const DEAD_MODEL = 'dead-model';
const pods: Record<string, SseUpstream> = {};
const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

const config = (): Record<string, unknown> => ({
  redis_url: redis.url,
  redis_key_prefix: PREFIX,
  otlp_endpoint: `${sink.url}/v1/traces`,
  service_name: 'kinference-it',
  ...SEEDED_INDEX_CONFIG,
  // The subject is tracing, not timing: a lookup past the default 25 ms on a loaded CI host would route on
  // load alone (index_timeout) to pod-a and fail the cache-aware assertions for a reason not under test.
  redis_timeout_ms: 2000,
});
const body = chatBody(LONG_SYSTEM_PROMPT, 'Summarise rule 12.', { stream: true });

async function spansOf(traceId: string, names: string[]): Promise<DecodedSpan[]> {
  return waitFor(`spans ${names.join(', ')}`, () => {
    const s = decodeSpans(sink.bodies).filter((x) => x.traceId === traceId);
    return names.every((n) => s.some((x) => x.name === n)) ? s : null;
  });
}

beforeAll(async () => {
  [redis, plugin, sink, fallback] = await Promise.all([
    startRedis(),
    buildPlugin(),
    startSink(),
    startNamedUpstream('fallback'),
  ]);
  for (const id of ['pod-a', 'pod-b']) pods[id] = await startSseUpstream(id);
  sick = await startServer((_req, res) => {
    res.writeHead(503, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"overloaded"}}');
  });
  await seedIndex(redis.url, PREFIX, SICK_MODEL, [{ id: 'pod-sick', address: `127.0.0.1:${sick.port}` }]);
  await seedIndex(redis.url, PREFIX, DEAD_MODEL, [
    { id: 'pod-dead', address: `127.0.0.1:${await freePort()}` },
  ]);
  const keys = await keysFor(config(), body);
  await seedIndex(redis.url, PREFIX, 'test-model', [
    { id: 'pod-a', address: `127.0.0.1:${pods['pod-a']!.port}`, holds: keys.slice(0, 3) },
    { id: 'pod-b', address: `127.0.0.1:${pods['pod-b']!.port}`, holds: keys },
  ]);
  gw = await startPluginGateway(plugin, fallback.url, config());
  // First request per router opens Redis (may exceed redis_timeout_ms and fall back by design).
  await (await fetch(gw.url + CHAT_PATH, { method: 'POST', body: JSON.stringify(body) })).text();
  await gw.idle();
});

afterAll(async () => {
  await gw?.close();
  await Promise.all([
    redis?.stop(),
    sink?.close(),
    fallback?.close(),
    sick?.close(),
    ...Object.values(pods).map((p) => p.close()),
  ]);
  plugin?.cleanup();
});

describe('plugin tracing (OTLP/HTTP from the plugin server)', () => {
  it('exports the decision with every candidate, parented on the client, and injects our span upstream', async () => {
    const r = await fetch(gw.url + CHAT_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` },
      body: JSON.stringify(body),
    });
    expect(r.headers.get('x-pod')).toBe('pod-b');
    await r.text();
    await gw.idle();

    const spans = await spansOf(CLIENT_TRACE, [SPAN_ROUTE, SPAN_TTFT]);
    const route = spans.find((s) => s.name === SPAN_ROUTE)!;
    expect(route.parentSpanId).toBe(CLIENT_SPAN);
    expect(route.resource['service.name']).toBe('kinference-it');
    const a = route.attributes;
    expect(a['gen_ai.request.model']).toBe('test-model');
    expect(a['gen_ai.usage.input_tokens']).toBeGreaterThan(16 * 20);
    expect(a['kinference.candidates.pod_ids']).toEqual(['pod-b', 'pod-a']);
    const cached = a['kinference.candidates.cached_tokens'] as number[];
    expect(cached[0]).toBeGreaterThan(cached[1]!);
    expect(cached[1]).toBe(48); // pod-a holds 3 blocks of 16
    expect((a['kinference.candidates.queue_ms'] as number[]).length).toBe(2);
    const predicted = a['kinference.candidates.predicted_ttft_ms'] as number[];
    expect(predicted[0]).toBeLessThan(predicted[1]!);
    expect(a['kinference.chosen.pod_id']).toBe('pod-b');
    expect(a['kinference.index.age_ms']).toBeGreaterThanOrEqual(0);
    expect(a['kinference.target']).toBe('pod');
    expect(a).not.toHaveProperty('kinference.fallback.reason');
    for (const k of ['tokenize_ms', 'lookup_ms', 'route_ms'])
      expect(a[`kinference.duration.${k}`]).toBeTypeOf('number');
    expect(a['server.port']).toBe(pods['pod-b']!.port);

    // vLLM would receive our span as its parent.
    const upstreamTp = String(pods['pod-b']!.requests.at(-1)!.headers.traceparent);
    expect(upstreamTp).toBe(`00-${CLIENT_TRACE}-${route.spanId}-01`);

    // The log phase: Kong's latencies.proxy as the actual TTFT, a child of the decision span.
    const ttft = spans.find((s) => s.name === SPAN_TTFT)!;
    expect(ttft.parentSpanId).toBe(route.spanId);
    expect(ttft.attributes['kinference.ttft.actual_ms']).toBeGreaterThanOrEqual(0);
    expect(ttft.attributes['kinference.ttft.observed']).toBe(true); // streamed 200 from the chosen pod
    expect(ttft.attributes['kinference.ttft.predicted_ms']).toBe(predicted[0]);
    expect(ttft.attributes['http.response.status_code']).toBe(200);
  });

  it('records the fallback reason on the span when the body is not a chat request (still served)', async () => {
    const trace = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab';
    const r = await fetch(gw.url + CHAT_PATH, {
      method: 'POST',
      headers: { traceparent: `00-${trace}-${CLIENT_SPAN}-01` },
      body: '{"model": "test-model", "messages": "not a list"}',
    });
    expect(r.status).toBe(200);
    await r.text();
    const [route] = await spansOf(trace, [SPAN_ROUTE]);
    expect(route!.attributes['kinference.fallback.reason']).toBe('body_not_chat');
    // fallback "least-loaded": the model is known, so a pod is still chosen on load alone
    expect(route!.attributes['kinference.target']).toBe('pod');
    expect(route!.attributes['kinference.candidates.cached_tokens']).toEqual([0, 0]);
  });

  /** Sends a traced request for `model`, expects `status` from Kong, and returns its exported spans. */
  async function failedRequestSpans(model: string, trace: string, status: number): Promise<DecodedSpan[]> {
    const r = await fetch(gw.url + CHAT_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${trace}-${CLIENT_SPAN}-01` },
      body: JSON.stringify({ ...body, model }),
    });
    expect(r.status).toBe(status);
    await r.text();
    await gw.idle();
    return spansOf(trace, [SPAN_ROUTE, SPAN_TTFT]);
  }

  it('marks the TTFT span failed when the chosen pod answers with a gateway error', async () => {
    const spans = await failedRequestSpans(SICK_MODEL, 'dddddddddddddddddddddddddddddddf', 503);
    const ttft = spans.find((s) => s.name === SPAN_TTFT)!;
    expect(ttft.attributes['http.response.status_code']).toBe(503);
    expect(ttft.status).toEqual({ code: 2, message: 'gateway error 503' });
    // The decision itself went as planned.
    expect(spans.find((s) => s.name === SPAN_ROUTE)!.status.code).toBe(0);
  });

  it('marks the TTFT span failed when the chosen pod refuses the connection', async () => {
    const spans = await failedRequestSpans(DEAD_MODEL, 'dddddddddddddddddddddddddddddde0', 502);
    const ttft = spans.find((s) => s.name === SPAN_TTFT)!;
    expect(ttft.status.code).toBe(2);
    expect(ttft.attributes['http.response.status_code']).toBe(502);
    expect(ttft.attributes['kinference.chosen.pod_id']).toBe('pod-dead');
  });

  it('starts a new trace when the request carries two traceparent headers (W3C: neither can be trusted)', async () => {
    const other = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbc';
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(gw.url + CHAT_PATH, {
        method: 'POST',
        // An array sends two header lines, as two proxies that each added one would.
        headers: {
          'content-type': 'application/json',
          traceparent: [`00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`, `00-${other}-${CLIENT_SPAN}-01`],
        },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
    expect(status).toBe(200);
    const upstreamTp = String(pods['pod-b']!.requests.at(-1)!.headers.traceparent);
    const [, traceId, spanId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(upstreamTp) ?? [];
    expect(traceId).toBeDefined();
    expect([CLIENT_TRACE, other]).not.toContain(traceId);
    const [route] = await spansOf(traceId!, [SPAN_ROUTE]);
    expect(route!.spanId).toBe(spanId);
    expect(route!.parentSpanId).toBeUndefined();
  });

  it('exports the spans still batched when Kong stops the plugin server (SIGTERM)', async () => {
    // A batch delay far past the test: only the exit flush can deliver these spans.
    process.env.OTEL_BSP_SCHEDULE_DELAY = '600000';
    let gw2: Gateway;
    try {
      gw2 = await startPluginGateway(plugin, fallback.url, config());
    } finally {
      delete process.env.OTEL_BSP_SCHEDULE_DELAY;
    }
    const trace = 'cccccccccccccccccccccccccccccccd';
    try {
      const r = await fetch(gw2.url + CHAT_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: `00-${trace}-${CLIENT_SPAN}-01` },
        body: JSON.stringify(body),
      });
      expect(r.status).toBe(200);
      await r.text();
      await gw2.idle();
      expect(decodeSpans(sink.bodies).filter((x) => x.traceId === trace)).toEqual([]);
    } finally {
      await gw2.close();
    }
    const spans = await spansOf(trace, [SPAN_ROUTE, SPAN_TTFT]);
    expect(spans.find((s) => s.name === SPAN_TTFT)!.parentSpanId).toBe(
      spans.find((s) => s.name === SPAN_ROUTE)!.spanId,
    );
  });
});
