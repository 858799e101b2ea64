// Workarounds for kong-pdk 0.6.0: no debug JSON of binary bodies, no event left behind by an exit or a "ret".
import { createRequire } from 'node:module';

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

/**
 * kong-pdk 0.6.0's server.js drops an event from `Server.events` only when a Step answers "ret". After
 * kong.response.exit/error Kong never steps that event again (in access, kong.response.exit stores the
 * delayed response and yields for good: kong/pdk/response.lua, runloop/plugin_servers/rpc/mp_rpc.lua), so
 * every exit — every 429 we shed — leaves its event and PipePair in the map for the life of the process.
 *
 * The fix wraps Server.prototype.HandleEvent and .step (every Step* alias goes through step): when the
 * answer asks Kong for a non-returning method, the event is forgotten right there. kong-pdk's bin has
 * already loaded server.js when it loads us, so the class is found in Node's module cache. Installed at
 * instance start (StartInstance), never at module load; the clean fix is upstream (same rule in step()).
 */

const exitMarker = Symbol.for('kinference.exitEventCleanup');
const NON_RETURNING = new Set(['kong.response.exit', 'kong.response.error']);
const SERVER_JS = /[\\/]kong-pdk[\\/]server\.js$/;

interface EventServer {
  events?: Map<unknown, unknown>;
}
type ServerMethod = (this: EventServer, ...args: unknown[]) => Promise<unknown>;

/** The event id of an answer that hands Kong a non-returning PDK call, else null. */
export function exitingEventId(answer: unknown): unknown {
  if (typeof answer !== 'object' || answer === null) return null;
  const { Data, EventId } = answer as { Data?: unknown; EventId?: unknown };
  if (typeof Data !== 'object' || Data === null) return null;
  const method = (Data as { Method?: unknown }).Method;
  return typeof method === 'string' && NON_RETURNING.has(method) ? (EventId ?? null) : null;
}

/**
 * The event id of a HandleEvent answered "ret" at once (a phase that made no PDK call): kong-pdk deletes an
 * event on "ret" only in step(), so such an event would stay in the map for good.
 */
export function finishedEventId(answer: unknown): unknown {
  if (typeof answer !== 'object' || answer === null) return null;
  const { Data, EventId } = answer as { Data?: unknown; EventId?: unknown };
  return Data === 'ret' ? (EventId ?? null) : null;
}

/** Patches one kong-pdk Server class; false when it does not look like kong-pdk 0.6's. */
export function patchServerClass(server: unknown): boolean {
  const proto = (server as { prototype?: Record<string | symbol, unknown> } | null)?.prototype;
  if (!proto) return false;
  if (proto[exitMarker]) return true;
  const names = ['HandleEvent', 'step'] as const;
  if (!names.every((n) => typeof proto[n] === 'function')) return false;
  for (const name of names) {
    const original = proto[name] as ServerMethod;
    proto[name] = async function (this: EventServer, ...args: unknown[]): Promise<unknown> {
      const answer = await original.apply(this, args);
      const id = exitingEventId(answer) ?? (name === 'HandleEvent' ? finishedEventId(answer) : null);
      if (id !== null) this.events?.delete(id);
      return answer;
    };
  }
  proto[exitMarker] = true;
  return true;
}

/** Patches every kong-pdk server.js in the module cache; returns how many were patched. */
export function installExitEventCleanup(
  cache: NodeJS.Dict<NodeJS.Module> = createRequire(import.meta.url).cache,
): number {
  let patched = 0;
  for (const [file, mod] of Object.entries(cache))
    if (SERVER_JS.test(file) && mod && patchServerClass(mod.exports)) patched++;
  return patched;
}
