// The one msgpack decoder for vLLM payloads (64-bit ints as BigInt, so no block hash is rounded).
import { Unpackr } from 'msgpackr';

/**
 * One decoder for vLLM payloads. 64-bit ints (msgpack cf/d3) come back as BigInt — block hashes use the
 * full uint64 range, and @msgpack/msgpack 2.x would round them to doubles. Records are off: vLLM is msgspec,
 * which never writes msgpackr's record extension.
 */
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });

export type MsgpackResult = { ok: true; value: unknown } | { ok: false; truncated: boolean; detail: string };

export function decodeMsgpack(raw: Uint8Array): MsgpackResult {
  if (raw.length === 0) return { ok: false, truncated: true, detail: 'empty payload' };
  try {
    return { ok: true, value: unpackr.unpack(raw) };
  } catch (e) {
    const err = e as Error & { incomplete?: boolean };
    return { ok: false, truncated: err.incomplete === true, detail: err.message };
  }
}
