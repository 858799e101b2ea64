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

/** A schema node as expectedInWords reads it. */
interface WordsNode {
  'x-expected'?: string;
  description?: string;
  type?: string;
  anyOf?: { const?: unknown }[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxItems?: number;
  items?: WordsNode;
}

/**
 * What a schema node accepts, in words: the one translation of the schema's types, enums, ranges and
 * patterns into text, for every place a config is checked (plugin load, fleet files, `kinference validate`).
 * A pattern is said by the field's `x-expected` (its regular expression says little to a user); null when a
 * pattern has none (the caller falls back on the description).
 */
export function expectedInWords(schema: unknown): string | null {
  const s = schema as WordsNode;
  if (typeof s['x-expected'] === 'string') return s['x-expected'];
  const literals = s.anyOf?.map((m) => m.const);
  if (literals?.length && literals.every((l) => l !== undefined))
    return `one of: ${literals.map((l) => JSON.stringify(l)).join(', ')}`;
  const range = (what: string): string =>
    s.minimum !== undefined && s.maximum !== undefined
      ? `${what} from ${s.minimum} to ${s.maximum}`
      : s.minimum !== undefined
        ? `${what} ≥ ${s.minimum}`
        : s.maximum !== undefined
          ? `${what} ≤ ${s.maximum}`
          : what;
  switch (s.type) {
    case 'integer':
      return range('a whole number');
    case 'number':
      return range('a number');
    case 'boolean':
      return 'true or false';
    case 'string':
      if ((s as { pattern?: string }).pattern !== undefined) return null;
      return s.minLength ? 'a non-empty string' : 'a string';
    case 'array': {
      const item = s.items ? expectedInWords(s.items) : null;
      const max = s.maxItems !== undefined ? ` (at most ${s.maxItems})` : '';
      return `a list${item ? ` of ${item}` : ''}${max}`;
    }
    case 'object':
      return 'a mapping (key: value)';
    default:
      return null;
  }
}

/** TypeBox errors about a value's type, range, length or form: said by expectedInWords. */
const SAID_IN_WORDS = new Set<ValueErrorType>([
  ValueErrorType.Array,
  ValueErrorType.ArrayMaxItems,
  ValueErrorType.Boolean,
  ValueErrorType.Integer,
  ValueErrorType.IntegerMinimum,
  ValueErrorType.IntegerMaximum,
  ValueErrorType.Literal,
  ValueErrorType.Number,
  ValueErrorType.NumberMinimum,
  ValueErrorType.NumberMaximum,
  ValueErrorType.Object,
  ValueErrorType.String,
  ValueErrorType.StringMinLength,
  ValueErrorType.StringPattern,
  ValueErrorType.Union,
]);

/** One checked field: where (a dotted path) and what is wrong, said in words. */
export interface ConfigIssue {
  field: string;
  message: string;
}

function issueOf(e: ValueError): ConfigIssue {
  const hint = (e.schema as { description?: string }).description;
  // A secret field (Kong stores it encrypted: redis_url, redis_sentinel_password) is echoed without its user
  // info when a string (a URL may hold a password), and not at all otherwise (a password given as a number).
  const secret = (e.schema as { 'x-kong'?: { encrypted?: boolean } })['x-kong']?.encrypted === true;
  const shown = !secret
    ? e.value
    : typeof e.value === 'string'
      ? e.value.replace(/\/\/.*@/s, '//***@')
      : '***';
  const got = e.value === undefined ? '' : ` (got ${JSON.stringify(shown)?.slice(0, 80)})`;
  const words = SAID_IN_WORDS.has(e.type) ? expectedInWords(e.schema) : null;
  const explicit = typeof (e.schema as WordsNode)['x-expected'] === 'string';
  // A long regular expression says less than the field's description of the form it wants.
  const message =
    words !== null
      ? `expected ${words}`
      : e.type === ValueErrorType.StringPattern && hint
        ? 'not in the expected form'
        : e.message;
  return { field: fieldName(e.path), message: `${message}${got}${hint && !explicit ? ` — ${hint}` : ''}` };
}

/** "pods.0.kv_event: unknown key; did you mean "kv_events"?" (or the keys that are allowed there). */
function unknownKeyIssue(e: ValueError): ConfigIssue {
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
  return { field: fieldName(e.path), message: `unknown key; ${hint}` };
}

/**
 * Defaults applied to `raw` and its problems against `schema`, each said in words (at most `limit`, the
 * same problem once).
 */
export function checkConfig<S extends TSchema>(
  schema: S,
  raw: unknown,
  limit = 10,
): { value: Static<S>; issues: ConfigIssue[] } {
  const value = applyDefaults(schema as SchemaNode, Value.Clone(stripNulls(raw ?? {})));
  const seen = new Set<string>();
  const issues: ConfigIssue[] = [];
  for (const e of Value.Errors(schema, value)) {
    const issue = e.type === ValueErrorType.ObjectAdditionalProperties ? unknownKeyIssue(e) : issueOf(e);
    const key = `${issue.field}: ${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
    if (issues.length >= limit) break;
  }
  return { value: value as Static<S>, issues };
}

/**
 * Applies defaults and checks `raw` against `schema`. On failure throws KINF_ERR_CONFIG naming the source,
 * each bad field and what was expected.
 */
export function validateConfig<S extends TSchema>(schema: S, raw: unknown, source: string): Static<S> {
  const { value, issues } = checkConfig(schema, raw);
  if (issues.length > 0)
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `${source}: invalid configuration\n${issues.map((i) => `  ${i.field}: ${i.message}`).join('\n')}`,
    );
  return value;
}
