import type { TSchema, Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
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

/** Drops nulls so that Kong's "unset optional field = null" reads as absent. */
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
      const hint = (e.schema as { description?: string }).description;
      const got = e.value === undefined ? '' : ` (got ${JSON.stringify(e.value)?.slice(0, 80)})`;
      const line = `  ${fieldName(e.path)}: ${e.message}${got}${hint ? ` — ${hint}` : ''}`;
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
