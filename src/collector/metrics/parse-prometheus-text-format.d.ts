// The package ships no types. Shape as documented in its README (prom2json-compatible).
declare module 'parse-prometheus-text-format' {
  export interface PromMetric {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    quantiles?: Record<string, string>;
    count?: string;
    sum?: string;
    timestamp_ms?: string;
  }
  export interface PromFamily {
    name: string;
    help: string;
    type: string;
    metrics: PromMetric[];
  }
  export default function parsePrometheusTextFormat(text: string): PromFamily[];
}
