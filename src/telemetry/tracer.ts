// The plugin's OpenTelemetry tracing: lazy OTLP/HTTP providers per config, retired when idle.
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
import { boundedDetail } from '../core/bounded-detail.js';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION, SPAN_ROUTE, SPAN_TTFT } from './attributes.js';

/**
 * The plugin's OpenTelemetry: one SDK tracer provider per (endpoint, service, version, ratio), built on first
 * use (nothing at module load: Kong's query command must exit at once), exporting OTLP/HTTP through a
 * BatchSpanProcessor (timer unref'd). Not registered as the global provider. When a config has no
 * otlp_endpoint the plugin never calls in here, so tracing off costs nothing per request. A provider nobody
 * has used for TRACER_RETIRE_AFTER_MS is flushed and shut down (a config change leaves the old one behind).
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
          // Small batches: the processor serializes a batch synchronously when the span that fills it ends,
          // and the plugin server is one process (512 spans took 25–200 ms there; 64 take an eighth).
          maxExportBatchSize: getNumberFromEnv('OTEL_BSP_MAX_EXPORT_BATCH_SIZE') ?? 64,
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
        const message = boundedDetail(e);
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

/**
 * How long a provider may go unused before it is retired. A config change makes Kong start a new plugin
 * instance and stop calling the old one, whose provider (batch processor, exporter, timer) would otherwise
 * live as long as the process. Ten minutes is far longer than any gap between requests on a route in use, and
 * a quiet route whose provider was retired gets a new one on its next request (one SDK setup, no span lost).
 */
export const TRACER_RETIRE_AFTER_MS = 10 * 60_000;

interface Entry {
  /** What getDecisionTracer hands out for this key (the same object while the entry lives). */
  readonly handle: DecisionTracer;
  readonly sdk: SdkDecisionTracer;
  lastUsedMs: number;
}

const tracers = new Map<string, Entry>();
/** Retirements still exporting: flushAllTracers and shutdownAllTracers wait for them too. */
const retiring = new Set<Promise<void>>();
let clock: () => number = Date.now;
let retireAfterMs = TRACER_RETIRE_AFTER_MS;

/** Tests only: the clock and idle age retirement uses; no argument restores Date.now and the default age. */
export function setTracerRetirementForTests(o: { now?: () => number; retireAfterMs?: number } = {}): void {
  clock = o.now ?? Date.now;
  retireAfterMs = o.retireAfterMs ?? TRACER_RETIRE_AFTER_MS;
}

function keyOf(opts: TracingOptions): string {
  return JSON.stringify([
    opts.endpoint,
    opts.serviceName,
    opts.serviceVersion,
    opts.sampleRatio,
    opts.scheduledDelayMs,
  ]);
}

/** Exports what it buffered, then stops it; never rejects (runs detached from the request that triggered it). */
async function retire(sdk: SdkDecisionTracer): Promise<void> {
  try {
    await sdk.flush();
  } catch {
    // The exporter reports its own failures (watchExports); shutdown below still releases the timer.
  }
  try {
    await sdk.shutdown();
  } catch {
    // Nothing left to release.
  }
}

/**
 * The live entry for `key`, created when there is none (first use, or used again after it was retired),
 * marked as used now; then every OTHER entry idle for longer than the retirement age is retired.
 */
function use(key: string, opts: TracingOptions, handle?: DecisionTracer): Entry {
  const now = clock();
  let e = tracers.get(key);
  if (!e) {
    e = { handle: handle ?? new TracerHandle(key, opts), sdk: new SdkDecisionTracer(opts), lastUsedMs: now };
    tracers.set(key, e);
  }
  e.lastUsedMs = now;
  for (const [k, other] of tracers) {
    if (k === key || now - other.lastUsedMs <= retireAfterMs) continue;
    tracers.delete(k);
    const done = retire(other.sdk);
    retiring.add(done);
    void done.then(() => retiring.delete(done));
  }
  return e;
}

/**
 * What callers hold. Every span goes through `use`, so a tracer a plugin instance keeps and records with is
 * never idle, and one that was retired while its route was quiet comes back on its next span.
 */
class TracerHandle implements DecisionTracer {
  readonly #key: string;
  readonly #opts: TracingOptions;

  constructor(key: string, opts: TracingOptions) {
    this.#key = key;
    this.#opts = opts;
  }

  startRoute(incomingTraceparent: string | undefined, startTimeMs: number, attrs?: Attributes): RouteSpan {
    return use(this.#key, this.#opts, this).sdk.startRoute(incomingTraceparent, startTimeMs, attrs);
  }

  recordTtft(
    parent: SpanRef,
    startTimeMs: number,
    endTimeMs: number,
    attrs: Attributes,
    error?: string,
  ): void {
    use(this.#key, this.#opts, this).sdk.recordTtft(parent, startTimeMs, endTimeMs, attrs, error);
  }

  async flush(): Promise<void> {
    await Promise.all([tracers.get(this.#key)?.sdk.flush(), ...retiring]);
  }

  async shutdown(): Promise<void> {
    const e = tracers.get(this.#key);
    if (!e) return;
    tracers.delete(this.#key);
    await e.sdk.shutdown();
  }
}

/**
 * The tracer for these options: the same object while it is in use, a new one after the old was retired.
 * Looking one up (or recording with one) retires the others that sat idle past TRACER_RETIRE_AFTER_MS.
 */
export function getDecisionTracer(opts: TracingOptions): DecisionTracer {
  return use(keyOf(opts), opts).handle;
}

/** Exports everything buffered (tests, graceful shutdown). */
export async function flushAllTracers(): Promise<void> {
  await Promise.all([...[...tracers.values()].map((e) => e.sdk.flush()), ...retiring]);
}

/**
 * Exports what is buffered and stops every tracer. With `timeoutMs`, gives up waiting after that long (a dead
 * or slow OTLP endpoint must not hold up a process that is asked to exit).
 */
export async function shutdownAllTracers(timeoutMs?: number): Promise<void> {
  const all = [...tracers.values()];
  tracers.clear();
  const done = Promise.allSettled([...all.map((e) => e.sdk.shutdown()), ...retiring]);
  if (timeoutMs === undefined) {
    await done;
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}
