/** W3C traceparent (version 00): `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

export interface TraceparentParts {
  traceId: string;
  spanId: string;
  sampled: boolean;
}

/** Parses a traceparent header (or the first of several); null when absent or malformed (all-zero ids too). */
export function parseTraceparent(value: string | string[] | undefined | null): TraceparentParts | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (typeof v !== 'string') return null;
  const m = TRACEPARENT.exec(v.trim().toLowerCase());
  if (!m) return null;
  const [, traceId, spanId, flags] = m as unknown as [string, string, string, string];
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return null;
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 };
}
