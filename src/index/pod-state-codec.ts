// PodState ↔ the flat field/value list of its Redis record (encode a patch, decode a record).
import { KinferenceError } from '../core/errors.js';
import type { Calibration, DecodeSteps, PodState } from '../core/types.js';
import { defaultPodState, type PodRef } from './kv-index.js';

/**
 * PodState ↔ a flat [field, value, …] list. Numbers are written with String() and read with Number(), which
 * round-trips every double; calibration is JSON ('' = null). The `id` field is always written.
 * In Redis the list is one string record per pod, "field=value\n" lines, values escaped so that any text
 * (a pod address with a newline, say) survives: the upsert script merges lines without reading values.
 */
export type PodStatePatch = Partial<Omit<PodState, 'podId' | 'model'>>;

type Codec = { field: string; encode(v: unknown): string; decode(s: string): unknown };

const num: Pick<Codec, 'encode' | 'decode'> = { encode: (v) => String(v), decode: (s) => Number(s) };
const bool: Pick<Codec, 'encode' | 'decode'> = { encode: (v) => (v ? '1' : '0'), decode: (s) => s === '1' };
const str: Pick<Codec, 'encode' | 'decode'> = { encode: (v) => String(v), decode: (s) => s };
/** A JSON object field ('' = null). */
const jsonObject = (what: string): Pick<Codec, 'encode' | 'decode'> => ({
  encode: (v) => (v === null ? '' : JSON.stringify(v)),
  decode: (s) => (s === '' ? null : parseJsonObject(s, what)),
});

const FIELDS: Record<keyof PodStatePatch, Codec> = {
  address: { field: 'address', ...str },
  healthy: { field: 'healthy', ...bool },
  running: { field: 'running', ...num },
  waiting: { field: 'waiting', ...num },
  kvUsage: { field: 'kv_usage', ...num },
  kvCapacityTokens: { field: 'kv_capacity_tokens', ...num },
  meanQueuedPrefillTokens: { field: 'mean_queued_prefill_tokens', ...num },
  maxModelLen: { field: 'max_model_len', ...num },
  calibration: { field: 'calibration', ...jsonObject('pod calibration') },
  decodeSteps: { field: 'decode_steps', ...jsonObject('pod decode steps') },
  lastEventAtMs: { field: 'last_event_at_ms', ...num },
  lastScrapeAtMs: { field: 'last_scrape_at_ms', ...num },
  resyncing: { field: 'resyncing', ...bool },
  partialSinceMs: { field: 'partial_since_ms', ...num },
};

const BY_FIELD = new Map(Object.entries(FIELDS).map(([prop, c]) => [c.field, { prop, c }]));

export const ID_FIELD = 'id';

/** Flat [field, value, …] for HSET: `id` first, then every defined field of the patch. */
export function encodePodState(podId: string, patch: PodStatePatch): string[] {
  const out = [ID_FIELD, podId];
  for (const [prop, v] of Object.entries(patch)) {
    const c = FIELDS[prop as keyof PodStatePatch];
    if (c && v !== undefined) out.push(c.field, c.encode(v));
  }
  return out;
}

/** The pod's state from its hash as a flat [field, value, …] list; absent fields keep their defaults. */
export function decodePodState(pod: PodRef, flat: readonly string[]): PodState {
  if (flat.length % 2 !== 0)
    throw new KinferenceError('KINF_ERR_INDEX_REPLY', `pod state of ${pod.podId}: odd field list`);
  const state = defaultPodState(pod) as unknown as Record<string, unknown>;
  for (let i = 0; i < flat.length; i += 2) {
    const hit = BY_FIELD.get(flat[i]!);
    if (hit) state[hit.prop] = hit.c.decode(flat[i + 1]!); // unknown fields: written by a newer version
  }
  return state as unknown as PodState;
}

/** A value as it is stored in a record line: `\` and newline escaped. */
export function escapeStateValue(v: string): string {
  return v.includes('\\') || v.includes('\n') ? v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n') : v;
}

/** A stored record ("field=value\n" lines, values escaped) as a flat [field, value, …] list. */
export function parseStateRecord(record: string): string[] {
  const flat: string[] = [];
  let at = 0;
  while (at < record.length) {
    const nl = record.indexOf('\n', at);
    const line = record.slice(at, nl < 0 ? record.length : nl);
    at = nl < 0 ? record.length : nl + 1;
    const eq = line.indexOf('=');
    if (eq <= 0)
      throw new KinferenceError('KINF_ERR_INDEX_REPLY', `pod state record line without a field: "${line}"`);
    const v = line.slice(eq + 1);
    flat.push(
      line.slice(0, eq),
      v.includes('\\') ? v.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c)) : v,
    );
  }
  return flat;
}

function parseJsonObject(s: string, what: string): Calibration | DecodeSteps {
  let v: unknown;
  try {
    v = JSON.parse(s);
  } catch (cause) {
    throw new KinferenceError('KINF_ERR_INDEX_REPLY', `${what} is not JSON`, { cause });
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new KinferenceError('KINF_ERR_INDEX_REPLY', `${what} is not a JSON object`);
  return v as Calibration | DecodeSteps;
}
