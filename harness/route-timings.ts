// Reads the plugin's x-kinference-route-timings header (expose_headers): ms per routing step.

/** `parse=…;template=…;tokenize=…;keys=…;lookup=…;predict=…` (plugins/kinference/upstream-headers.ts) → ms per step. */
export function routeStepsOf(headers: Record<string, string> | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const kv of (headers?.['x-kinference-route-timings'] ?? '').split(';')) {
    const [k, v] = kv.split('=');
    if (k && v) out[k] = Number(v);
  }
  return out;
}
