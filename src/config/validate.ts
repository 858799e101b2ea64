// Checks config against a TypeBox schema: defaults filled, errors naming each bad field (and likely typos).
import type { TSchema, Static } from '@sinclair/typebox';
import { Value, ValueErrorType, type ValueError } from '@sinclair/typebox/value';
import { KinferenceError } from '../core/errors.js';

/** JSON-pointer "/models/Qwen~1Qwen3-8B/block_size" → "models.Qwen/Qwen3-8B.block_size". */
function fieldName(path: string): string {
  if (path === '') return '(top level)';
  return path
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

/** Drops nulls, so that a null (e.g. inside a map value Kong passed through) reads as absent. */
export function stripNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripNulls);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = stripNulls(x);
    return out;
  }
  return v;
}

interface SchemaNode {
  default?: unknown;
  type?: string;
  properties?: Record<string, SchemaNode>;
  patternProperties?: Record<string, SchemaNode>;
  items?: SchemaNode;
}

/** Fills defaults recursively, including inside records (map-like objects), which Value.Default skips. */
function applyDefaults(schema: SchemaNode, value: unknown): unknown {
  if (value === undefined && schema.default !== undefined) value = structuredClone(schema.default);
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return schema.items ? value.map((v) => applyDefaults(schema.items!, v)) : value;
  const obj = value as Record<string, unknown>;
  if (schema.properties)
    for (const [k, sub] of Object.entries(schema.properties)) {
      const v = applyDefaults(sub, obj[k]);
      if (v !== undefined) obj[k] = v;
    }
  if (schema.patternProperties) {
    const sub = Object.values(schema.patternProperties)[0];
    if (sub) for (const k of Object.keys(obj)) obj[k] = applyDefaults(sub, obj[k]);
  }
  return obj;
}

/** Edit distance (insertions, deletions, substitutions, adjacent swaps) between two short strings. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  return d[a.length]![b.length]!;
}

/** The known key closest to `key`, if it is close enough to be a likely typo; else null. */
export function closestKey(key: string, known: readonly string[]): string | null {
  const k = key.toLowerCase().replace(/-/g, '_');
  let best: string | null = null;
  let bestD = Infinity;
  for (const cand of known) {
    const c = cand.toLowerCase();
    const dist = editDistance(k, c);
    if (dist < bestD) {
      bestD = dist;
      best = cand;
    }
  }
  return best !== null && bestD <= Math.max(2, Math.floor(best.length / 4)) ? best : null;
}

function errorLine(e: ValueError): string {
  const hint = (e.schema as { description?: string }).description;
  const got = e.value === undefined ? '' : ` (got ${JSON.stringify(e.value)?.slice(0, 80)})`;
  // A long regular expression says less than the field's description of the form it wants; a union of
  // literals (an enum) is best said by its values.
  const literals = (e.schema as { anyOf?: { const?: unknown }[] }).anyOf?.map((m) => m.const);
  const message =
    e.type === ValueErrorType.StringPattern && hint
      ? 'not in the expected form'
      : e.type === ValueErrorType.Union && literals?.length && literals.every((l) => l !== undefined)
        ? `expected one of: ${literals.map((l) => JSON.stringify(l)).join(', ')}`
        : e.message;
  return `  ${fieldName(e.path)}: ${message}${got}${hint ? ` — ${hint}` : ''}`;
}

/** "pods.0.kv_event: unknown key; did you mean "kv_events"?" (or the keys that are allowed there). */
function unknownKeyLine(e: ValueError): string {
  const key = e.path
    .slice(e.path.lastIndexOf('/') + 1)
    .replace(/~1/g, '/')
    .replace(/~0/g, '~');
  const known = Object.keys((e.schema as SchemaNode).properties ?? {});
  const near = closestKey(key, known);
  const hint = near
    ? `did you mean "${near}"?`
    : known.length > 0
      ? `known keys here: ${known.join(', ')}`
      : 'no keys are allowed here';
  return `  ${fieldName(e.path)}: unknown key; ${hint}`;
}

/**
 * Applies defaults and checks `raw` against `schema`. On failure throws KINF_ERR_CONFIG naming the source,
 * each bad field and what was expected.
 */
export function validateConfig<S extends TSchema>(schema: S, raw: unknown, source: string): Static<S> {
  const value = applyDefaults(schema as SchemaNode, Value.Clone(stripNulls(raw ?? {})));
  const errors = [...Value.Errors(schema, value)];
  if (errors.length > 0) {
    const seen = new Set<string>();
    const lines: string[] = [];
    for (const e of errors) {
      const line = e.type === ValueErrorType.ObjectAdditionalProperties ? unknownKeyLine(e) : errorLine(e);
      if (!seen.has(line)) {
        seen.add(line);
        lines.push(line);
      }
      if (lines.length >= 10) break;
    }
    throw new KinferenceError('KINF_ERR_CONFIG', `${source}: invalid configuration\n${lines.join('\n')}`);
  }
  return value as Static<S>;
}
