/** Decodes OTLP/HTTP JSON export bodies (what @opentelemetry/exporter-trace-otlp-http POSTs) for assertions. */

type AnyValue = {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};

export interface DecodedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string | undefined };
  events: { name: string; attributes: Record<string, unknown> }[];
}

function value(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value);
  return undefined;
}

function attrs(list: { key: string; value: AnyValue }[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]));
}

export function decodeSpans(bodies: unknown[]): DecodedSpan[] {
  const out: DecodedSpan[] = [];
  for (const b of bodies) {
    const rs = (b as { resourceSpans?: unknown[] }).resourceSpans ?? [];
    for (const r of rs as {
      resource?: { attributes?: never };
      scopeSpans?: { spans?: Record<string, unknown>[] }[];
    }[]) {
      const resource = attrs(r.resource?.attributes);
      for (const ss of r.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          out.push({
            name: String(s.name),
            traceId: String(s.traceId),
            spanId: String(s.spanId),
            parentSpanId: s.parentSpanId ? String(s.parentSpanId) : undefined,
            kind: Number(s.kind),
            startMs: Number(BigInt(String(s.startTimeUnixNano)) / 1_000_000n),
            endMs: Number(BigInt(String(s.endTimeUnixNano)) / 1_000_000n),
            attributes: attrs(s.attributes as never),
            resource,
            status: {
              code: Number((s.status as { code?: number } | undefined)?.code ?? 0),
              message: (s.status as { message?: string } | undefined)?.message,
            },
            events: ((s.events ?? []) as { name: string; attributes?: never }[]).map((e) => ({
              name: e.name,
              attributes: attrs(e.attributes),
            })),
          });
    }
  }
  return out;
}
