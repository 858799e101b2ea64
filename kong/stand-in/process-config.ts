// What Kong does to a plugin's config before the plugin server sees it: schema validation, defaults.
import type { KongField, KongFieldEntry } from '../../src/config/to-kong-schema.js';
import { luaMatches } from './lua-pattern.js';
import { isRecord as isObj } from '../../src/core/is-record.js';

/**
 * What Kong does to a plugin's config before it reaches the plugin server (kong/db/schema/init.lua):
 * validate every field against the plugin's Kong schema (types, required, one_of, between, len_*, match,
 * match_any; unknown fields rejected) and fill the defaults of absent fields. An explicit null is not
 * defaulted (handle_missing_field runs for absent values only): on a required field it is "required field
 * missing". Unset optional fields are stored as null, but plugins_iterator reads plugins back with
 * row_to_entity → process_auto_fields("select") without `nulls`, which drops them: `StartInstance.Config`
 * has no key for them. Errors use Kong's wording.
 */

export type ConfigErrors = Record<string, string>;

export type ProcessResult =
  { ok: true; config: Record<string, unknown> } | { ok: false; errors: ConfigErrors };

function clone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

function checkValue(f: KongField, v: unknown, path: string, errors: ConfigErrors): unknown {
  switch (f.type) {
    case 'string':
      if (typeof v !== 'string') return void (errors[path] = 'expected a string');
      if (v.length < (f.len_min ?? 1))
        return void (errors[path] = `length must be at least ${f.len_min ?? 1}`);
      if (f.len_max !== undefined && v.length > f.len_max)
        return void (errors[path] = `length must be at most ${f.len_max}`);
      if (f.match !== undefined && !luaMatches(f.match, v))
        return void (errors[path] = `invalid value: ${v}`);
      if (f.match_any && !f.match_any.patterns.some((p) => luaMatches(p, v)))
        return void (errors[path] = f.match_any.err);
      break;
    case 'integer':
      if (typeof v !== 'number' || !Number.isInteger(v)) return void (errors[path] = 'expected an integer');
      break;
    case 'number':
      if (typeof v !== 'number' || !Number.isFinite(v)) return void (errors[path] = 'expected a number');
      break;
    case 'boolean':
      if (typeof v !== 'boolean') return void (errors[path] = 'expected a boolean');
      break;
    case 'array': {
      // cjson decodes {} and [] alike; an empty map is an empty array to Kong.
      if (isObj(v) && Object.keys(v).length === 0) return [];
      if (!Array.isArray(v)) return void (errors[path] = 'expected an array');
      if (f.len_min !== undefined && v.length < f.len_min)
        return void (errors[path] = `length must be at least ${f.len_min}`);
      if (f.len_max !== undefined && v.length > f.len_max)
        return void (errors[path] = `length must be at most ${f.len_max}`);
      return v.map((x, i) => (f.elements ? checkValue(f.elements, x, `${path}.${i + 1}`, errors) : x));
    }
    case 'map': {
      if (Array.isArray(v) && v.length === 0) return {};
      if (!isObj(v)) return void (errors[path] = 'expected a map');
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        if (f.keys) checkValue(f.keys, k, `${path}.${k}`, errors);
        out[k] = f.values ? checkValue(f.values, x, `${path}.${k}`, errors) : x;
      }
      return out;
    }
    case 'record': {
      if (!isObj(v)) return void (errors[path] = 'expected a record');
      const r = processFields(f.fields ?? [], v, `${path}.`);
      if (!r.ok) Object.assign(errors, r.errors);
      return r.ok ? r.config : undefined;
    }
  }
  if (f.one_of && !f.one_of.includes(v as string | number))
    return void (errors[path] = `expected one of: ${f.one_of.join(', ')}`);
  if (f.between && typeof v === 'number' && (v < f.between[0] || v > f.between[1]))
    return void (errors[path] = `value should be between ${f.between[0]} and ${f.between[1]}`);
  return v;
}

function processFields(fields: KongFieldEntry[], input: Record<string, unknown>, prefix = ''): ProcessResult {
  const errors: ConfigErrors = {};
  const out: Record<string, unknown> = {};
  const known = new Set<string>();
  for (const entry of fields) {
    const [name, f] = Object.entries(entry)[0]!;
    known.add(name);
    const path = prefix + name;
    let v = input[name];
    if (v === undefined) v = clone(f.default);
    if (v === undefined || v === null) {
      if (f.required) errors[path] = 'required field missing';
      continue;
    }
    out[name] = checkValue(f, v, path, errors);
  }
  for (const k of Object.keys(input)) if (!known.has(k)) errors[prefix + k] = 'unknown field';
  return Object.keys(errors).length > 0 ? { ok: false, errors } : { ok: true, config: out };
}

/** Validates `userConfig` against the plugin's Kong schema and returns Kong's processed config. */
export function processPluginConfig(
  schema: KongFieldEntry[],
  userConfig: Record<string, unknown>,
): ProcessResult {
  return processFields(schema, userConfig);
}
