/** Telemetry surface for the plugin: lazy SDK tracer, decision → attributes mapper, traceparent parsing. */
export * from './attributes.js';
export { decisionAttributes, type DecisionRecord } from './decision-attributes.js';
export {
  getDecisionTracer,
  flushAllTracers,
  shutdownAllTracers,
  type DecisionTracer,
  type RouteSpan,
  type SpanRef,
  type TracingOptions,
} from './tracer.js';
