import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api';
import { getNumberFromEnv, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION, SPAN_ROUTE, SPAN_TTFT } from './attributes.js';

/**
 * The plugin's OpenTelemetry: one SDK tracer provider per (endpoint, service, version, ratio), built on first
 * use (nothing at module load: Kong's query command must exit at once), exporting OTLP/HTTP through a
 * BatchSpanProcessor (timer unref'd). Not registered as the global provider. When a config has no
 * otlp_endpoint the plugin never calls in here, so tracing off costs nothing per request.
 */

export interface TracingOptions {
  /** OTLP/HTTP traces URL, e.g. http://jaeger:4318/v1/traces. */
  endpoint: string;
  serviceName: string;
  serviceVersion: string;
  /** Ratio for traces without a parent; a parent's sampled flag is followed (parent-based). */
  sampleRatio: number;
  /** BatchSpanProcessor delay between exports (default: OTEL_BSP_SCHEDULE_DELAY, else 500 ms). */
  scheduledDelayMs?: number;
}

/** Enough of a span to parent another on it later (the log phase runs after the access span ended). */
export interface SpanRef {
  traceId: string;
  spanId: string;
  traceFlags: number;
}

export interface RouteSpan {
  readonly ref: SpanRef;
  /** W3C traceparent to send upstream: our span as the parent, so vLLM's spans join the trace. */
  readonly traceparent: string;
  readonly sampled: boolean;
  setAttributes(attrs: Attributes): void;
  /** Marks the span as failed (status ERROR, an `exception` event), e.g. when the plugin glue threw. */
  fail(error: unknown): void;
  end(endTimeMs?: number): void;
}

export interface DecisionTracer {
  startRoute(incomingTraceparent: string | undefined, startTimeMs: number, attrs?: Attributes): RouteSpan;
  /** `error`: what went wrong upstream (status ERROR on the span); absent when the pod answered normally. */
  recordTtft(
    parent: SpanRef,
    startTimeMs: number,
    endTimeMs: number,
    attrs: Attributes,
    error?: string,
  ): void;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const getter: TextMapGetter<Record<string, string>> = {
  keys: (c) => Object.keys(c),
  get: (c, k) => c[k],
};
const setter: TextMapSetter<Record<string, string>> = {
  set: (c, k, v) => {
    c[k] = v;
  },
};

const propagator = new W3CTraceContextPropagator();

class SdkDecisionTracer implements DecisionTracer {
  readonly #provider: BasicTracerProvider;
  readonly #tracer: Tracer;

  constructor(opts: TracingOptions) {
    const exporter = new OTLPTraceExporter({ url: opts.endpoint });
    this.#provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        [ATTR_SERVICE_NAME]: opts.serviceName,
        [ATTR_SERVICE_VERSION]: opts.serviceVersion,
      }),
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(opts.sampleRatio) }),
      spanProcessors: [
        new BatchSpanProcessor(exporter, {
          // The standard OTEL_BSP_* variables win over our defaults (passing a value hides them from the SDK).
          scheduledDelayMillis: opts.scheduledDelayMs ?? getNumberFromEnv('OTEL_BSP_SCHEDULE_DELAY') ?? 500,
          maxQueueSize: getNumberFromEnv('OTEL_BSP_MAX_QUEUE_SIZE') ?? 4096,
          maxExportBatchSize: getNumberFromEnv('OTEL_BSP_MAX_EXPORT_BATCH_SIZE') ?? 512,
          exportTimeoutMillis: getNumberFromEnv('OTEL_BSP_EXPORT_TIMEOUT') ?? 10_000,
        }),
      ],
    });
    this.#tracer = this.#provider.getTracer('kinference', opts.serviceVersion);
  }

  startRoute(
    incomingTraceparent: string | undefined,
    startTimeMs: number,
    attrs: Attributes = {},
  ): RouteSpan {
    let parent: Context = ROOT_CONTEXT;
    if (incomingTraceparent)
      parent = propagator.extract(ROOT_CONTEXT, { traceparent: incomingTraceparent }, getter);
    const span: Span = this.#tracer.startSpan(
      SPAN_ROUTE,
      { kind: SpanKind.INTERNAL, startTime: startTimeMs, attributes: attrs },
      parent,
    );
    const sc = span.spanContext();
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(parent, span), carrier, setter);
    return {
      ref: { traceId: sc.traceId, spanId: sc.spanId, traceFlags: sc.traceFlags },
      traceparent: carrier.traceparent ?? `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags & 1}`,
      sampled: (sc.traceFlags & 1) === 1,
      setAttributes: (a) => void span.setAttributes(a),
      fail: (e) => {
        const message = (e instanceof Error ? e.message : String(e)).slice(0, 300);
        span.recordException(e instanceof Error ? e : message);
        span.setStatus({ code: SpanStatusCode.ERROR, message });
      },
      end: (t) => span.end(t),
    };
  }

  recordTtft(
    parent: SpanRef,
    startTimeMs: number,
    endTimeMs: number,
    attrs: Attributes,
    error?: string,
  ): void {
    const ctx = trace.setSpanContext(ROOT_CONTEXT, { ...parent, isRemote: false });
    const span = this.#tracer.startSpan(
      SPAN_TTFT,
      { kind: SpanKind.INTERNAL, startTime: startTimeMs, attributes: attrs },
      ctx,
    );
    if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    span.end(endTimeMs);
  }

  flush(): Promise<void> {
    return this.#provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.#provider.shutdown();
  }
}

const tracers = new Map<string, DecisionTracer>();

/** The tracer for these options, created on first use and kept for the life of the process. */
export function getDecisionTracer(opts: TracingOptions): DecisionTracer {
  const key = JSON.stringify([
    opts.endpoint,
    opts.serviceName,
    opts.serviceVersion,
    opts.sampleRatio,
    opts.scheduledDelayMs,
  ]);
  let t = tracers.get(key);
  if (!t) {
    t = new SdkDecisionTracer(opts);
    tracers.set(key, t);
  }
  return t;
}

/** Exports everything buffered (tests, graceful shutdown). */
export async function flushAllTracers(): Promise<void> {
  await Promise.all([...tracers.values()].map((t) => t.flush()));
}

/**
 * Exports what is buffered and stops every tracer. With `timeoutMs`, gives up waiting after that long (a dead
 * or slow OTLP endpoint must not hold up a process that is asked to exit).
 */
export async function shutdownAllTracers(timeoutMs?: number): Promise<void> {
  const all = [...tracers.values()];
  tracers.clear();
  const done = Promise.allSettled(all.map((t) => t.shutdown()));
  if (timeoutMs === undefined) {
    await done;
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}
