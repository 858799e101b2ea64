import { createServer, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SPAN_ROUTE, SPAN_TTFT } from '../../../src/telemetry/attributes.js';
import {
  flushAllTracers,
  getDecisionTracer,
  setTracerRetirementForTests,
  shutdownAllTracers,
  TRACER_RETIRE_AFTER_MS,
  type TracingOptions,
} from '../../../src/telemetry/tracer.js';
import { waitFor } from '../../helpers/ports.js';
import { startSink, type Sink } from '../kong/test-servers.js';
import { decodeSpans } from './otlp.js';

/** The SDK tracer against a real OTLP/HTTP receiver: what Jaeger would get. */

let sink: Sink;
beforeAll(async () => {
  sink = await startSink();
});
afterAll(async () => {
  await shutdownAllTracers();
  await sink?.close();
});

describe('decision tracer (OTLP/HTTP)', () => {
  it('exports a route span parented on the incoming traceparent, a TTFT child, and the upstream traceparent', async () => {
    const tracer = getDecisionTracer({
      endpoint: `${sink.url}/v1/traces`,
      serviceName: 'kinference-test',
      serviceVersion: '9.9.9',
      sampleRatio: 1,
    });
    const incoming = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const t0 = Date.now();
    const span = tracer.startRoute(incoming, t0, {
      'gen_ai.request.model': 'm',
      'kinference.candidates.pod_ids': ['a', 'b'],
    });
    span.end(t0 + 3);
    expect(span.sampled).toBe(true);
    expect(span.traceparent).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${span.ref.spanId}-01`);
    tracer.recordTtft(span.ref, t0 + 3, t0 + 250, { 'kinference.ttft.actual_ms': 247 });
    await tracer.flush();
    await waitFor('spans', () => decodeSpans(sink.bodies).length >= 2);
    const spans = decodeSpans(sink.bodies);
    const route = spans.find((s) => s.name === SPAN_ROUTE)!;
    const ttft = spans.find((s) => s.name === SPAN_TTFT)!;
    expect(route.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(route.parentSpanId).toBe('00f067aa0ba902b7');
    expect(route.spanId).toBe(span.ref.spanId);
    expect(route.kind).toBe(1); // SPAN_KIND_INTERNAL
    expect(route.attributes).toMatchObject({
      'gen_ai.request.model': 'm',
      'kinference.candidates.pod_ids': ['a', 'b'],
    });
    expect(route.resource).toMatchObject({ 'service.name': 'kinference-test', 'service.version': '9.9.9' });
    expect(route.endMs - route.startMs).toBe(3);
    expect(ttft.traceId).toBe(route.traceId);
    expect(ttft.parentSpanId).toBe(route.spanId);
    expect(ttft.attributes['kinference.ttft.actual_ms']).toBe(247);
    expect(ttft.endMs - ttft.startMs).toBe(247);
  });

  it('starts a new trace without a parent, and follows an unsampled parent (no export, still propagated)', async () => {
    const tracer = getDecisionTracer({
      endpoint: `${sink.url}/v1/traces`,
      serviceName: 's',
      serviceVersion: '1.0.0',
      sampleRatio: 1,
    });
    const root = tracer.startRoute(undefined, Date.now());
    root.end();
    expect(root.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const n = decodeSpans(sink.bodies).length;
    const unsampled = tracer.startRoute(
      '00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-00',
      Date.now(),
    );
    unsampled.end();
    expect(unsampled.sampled).toBe(false);
    expect(unsampled.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4737-[0-9a-f]{16}-00$/);
    await tracer.flush();
    await waitFor('root span', () => decodeSpans(sink.bodies).length > n);
    const names = decodeSpans(sink.bodies)
      .slice(n)
      .map((s) => s.traceId);
    expect(names).not.toContain('4bf92f3577b34da6a3ce929d0e0e4737');
  });

  it('hands out one tracer per configuration', () => {
    const o = {
      endpoint: `${sink.url}/v1/traces`,
      serviceName: 'x',
      serviceVersion: '1.0.0',
      sampleRatio: 0.5,
    };
    expect(getDecisionTracer(o)).toBe(getDecisionTracer({ ...o }));
    expect(getDecisionTracer(o)).not.toBe(getDecisionTracer({ ...o, sampleRatio: 0.25 }));
  });

  describe('retiring tracers a config change left behind', () => {
    let now = 0;
    // A long batch delay: only a flush or a shutdown exports within the test.
    const opts = (serviceName: string): TracingOptions => ({
      endpoint: `${sink.url}/v1/traces`,
      serviceName,
      serviceVersion: '1.0.0',
      sampleRatio: 1,
      scheduledDelayMs: 60_000,
    });
    const spansOf = (name: string) =>
      decodeSpans(sink.bodies).filter((s) => s.resource['service.name'] === name);

    beforeEach(async () => {
      await shutdownAllTracers();
      now = Date.now();
      setTracerRetirementForTests({ now: () => now });
    });
    afterEach(() => setTracerRetirementForTests());

    it('retires one idle past the age when another is looked up, after exporting what it buffered', async () => {
      const a = getDecisionTracer(opts('retire-a'));
      a.startRoute(undefined, Date.now()).end();
      const b = getDecisionTracer(opts('retire-b'));
      now += TRACER_RETIRE_AFTER_MS;
      expect(getDecisionTracer(opts('retire-b'))).toBe(b);
      // Idle exactly the age: still the same tracer, its span still buffered.
      expect(getDecisionTracer(opts('retire-a'))).toBe(a);
      expect(spansOf('retire-a')).toHaveLength(0);

      now += TRACER_RETIRE_AFTER_MS + 1;
      expect(getDecisionTracer(opts('retire-b'))).toBe(b);
      // No flush called: only the retirement's shutdown sends it.
      await waitFor('retired tracer exported', () => spansOf('retire-a').length === 1);
      const a2 = getDecisionTracer(opts('retire-a'));
      expect(a2).not.toBe(a);

      // A caller still holding the retired one loses nothing: its spans go through the live provider.
      a.startRoute(undefined, Date.now()).end();
      await flushAllTracers();
      await waitFor('span after retirement', () => spansOf('retire-a').length === 2);
    });

    it('never retires a tracer that is recording, though it was looked up only once (as the plugin does)', async () => {
      const c = getDecisionTracer(opts('in-use-c'));
      for (let i = 0; i < 3; i++) {
        now += TRACER_RETIRE_AFTER_MS - 1;
        c.startRoute(undefined, Date.now()).end();
        getDecisionTracer(opts(`other-${i}`));
      }
      // 3 × (age − 1) since its lookup, but recording all along: still the live tracer, spans still buffered.
      expect(getDecisionTracer(opts('in-use-c'))).toBe(c);
      await flushAllTracers();
      await waitFor('spans of the tracer in use', () => spansOf('in-use-c').length === 3);
      // One export, by the flush: a retirement on the way would have sent the earlier spans on their own.
      const exports = sink.bodies.filter((b) =>
        decodeSpans([b]).some((s) => s.resource['service.name'] === 'in-use-c'),
      );
      expect(exports).toHaveLength(1);
    });
  });

  it('shuts down within the given bound when the OTLP endpoint accepts but never answers', async () => {
    const sockets = new Set<Socket>();
    const blackhole = createServer((c) => void sockets.add(c));
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
    try {
      const port = (blackhole.address() as { port: number }).port;
      const tracer = getDecisionTracer({
        endpoint: `http://127.0.0.1:${port}/v1/traces`,
        serviceName: 'slow',
        serviceVersion: '1.0.0',
        sampleRatio: 1,
      });
      tracer.startRoute(undefined, Date.now()).end();
      const t0 = Date.now();
      await shutdownAllTracers(300);
      // The SDK alone would wait out its 10 s export timeout.
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      for (const c of sockets) c.destroy();
      await new Promise<void>((resolve) => blackhole.close(() => resolve()));
    }
  });
});
