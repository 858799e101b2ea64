/**
 * kong-pdk 0.6.0's listener builds a debug line for every RPC with `JSON.stringify(args)`, even when debug
 * logging is off. The raw body arrives as a Buffer (a subarray of the socket chunk), so that line serializes
 * it as `{"type":"Buffer","data":[123,34,…]}`: ≈2.3 ms per 64 KB and ≈60 ms per MB on this machine, far more
 * than the chunk re-concatenation it is usually blamed on (bench/results/plugin.json, `transportOnly`).
 *
 * Giving Buffer and Uint8Array a `toJSON` that prints only the length makes that line O(1). The change is
 * process-wide, which is acceptable in this one process: it serves this plugin only (Kong ≥ 3.9 registers one
 * plugin per server), and nothing in it serializes binary data to JSON (kong-pdk sends msgpack, OTLP export
 * uses hex ids, Redis speaks RESP). It also keeps request bodies out of the server's debug log. Installed on
 * the first request, never at module load; KINFERENCE_KEEP_BUFFER_JSON=1 turns it off. The clean fix is
 * upstream (guard the debug line); docs/plugin.md shows the one-line patch for an image.
 */

const marker = Symbol.for('kinference.bufferJsonShortcut');

function bytesLabel(this: Uint8Array): string {
  return `<${this.byteLength} bytes>`;
}

export function installBinaryJsonShortcut(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.KINFERENCE_KEEP_BUFFER_JSON === '1') return false;
  const g = globalThis as Record<symbol, unknown>;
  if (g[marker]) return true;
  for (const proto of [Uint8Array.prototype, Buffer.prototype])
    Object.defineProperty(proto, 'toJSON', {
      value: bytesLabel,
      writable: true,
      configurable: true,
      enumerable: false,
    });
  g[marker] = true;
  return true;
}
