// Kong's plugin schema derived from the TypeBox plugin config, regexes translated to Lua patterns.
import { Kind, type TObject, type TSchema } from '@sinclair/typebox';
import { KinferenceError } from '../core/errors.js';

/**
 * Kong's plugin schema, derived from the TypeBox config (the one source, plugin-config.ts).
 * Mapping (kong.md §5.3): literal unions → string + one_of; minimum/maximum → between; minLength/maxLength →
 * len_min/len_max; regex `pattern` → Lua `match` (or `match_any` for a top-level alternation); records →
 * map; `x-kong` attributes (referenceable, encrypted, or an explicit match) are copied over the derived ones.
 * Kong checks single fields; cross-field rules stay in TypeScript (validateConfig at instance creation).
 */

export interface KongMatchAny {
  patterns: string[];
  err: string;
}

export interface KongField {
  type: 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'map' | 'record';
  required?: boolean;
  default?: unknown;
  description?: string;
  one_of?: (string | number)[];
  between?: [number, number];
  len_min?: number;
  len_max?: number;
  match?: string;
  match_any?: KongMatchAny;
  elements?: KongField;
  keys?: KongField;
  values?: KongField;
  fields?: KongFieldEntry[];
  referenceable?: boolean;
  encrypted?: boolean;
}

/** Kong's field list syntax: an array of single-key objects, in declaration order. */
export type KongFieldEntry = Record<string, KongField>;

/** What kong-js-pluginserver's GetPluginInfo wraps the JS `Schema` in (server.js). */
export interface KongPluginSchema {
  name: string;
  fields: [{ config: { type: 'record'; fields: KongFieldEntry[] } }];
}

const DESCRIPTION_MIN = 10;
const DESCRIPTION_MAX = 500;
/** Beyond this many optional repetitions a bounded quantifier is not expanded into `x?x?…`. */
const MAX_EXPANSION = 16;

type Schema = TSchema & Record<string, unknown>;

function fail(where: string, message: string): never {
  throw new KinferenceError('KINF_ERR_INTERNAL', `to-kong-schema: ${where}: ${message}`);
}

// ---------------------------------------------------------------------------------------------------------
// Regex (ECMAScript, the subset our config uses) → Lua pattern. Lua patterns have no alternation, groups or
// counted repetition, so anything else is refused loudly: give the field an explicit `x-kong.match` instead.

const LUA_MAGIC = new Set(['^', '$', '(', ')', '%', '.', '[', ']', '*', '+', '-', '?']);

function luaLiteral(ch: string): string {
  return LUA_MAGIC.has(ch) ? `%${ch}` : ch;
}

// \s is not here: JS's covers Unicode spaces (U+00A0, U+2028, …), Lua's %s only ASCII ones; write the
// characters out ([ \t\n\v\f\r]). Nor is `.`: JS's stops at line ends, Lua's does not; write [^\n\r].
const ESCAPE_CLASSES: Record<string, string> = {
  d: '%d',
  D: '%D',
  w: '[%w_]',
  W: '[^%w_]',
};
const SET_ESCAPE_CLASSES: Record<string, string> = { d: '%d', w: '%w_' };
/** Escapes of one control character: the same character in a Lua pattern (magic in neither). */
const CONTROL_ESCAPES: Record<string, string> = { t: '\t', n: '\n', v: '\v', f: '\f', r: '\r' };

interface Atom {
  lua: string;
}

/** Parses one atom at `i`; returns it and the next index. */
function parseAtom(re: string, i: number, where: string): [Atom, number] {
  const ch = re[i]!;
  if (ch === '\\') {
    const e = re[i + 1];
    if (e === undefined) fail(where, `dangling escape in /${re}/`);
    if (ESCAPE_CLASSES[e]) return [{ lua: ESCAPE_CLASSES[e] }, i + 2];
    if (CONTROL_ESCAPES[e]) return [{ lua: CONTROL_ESCAPES[e] }, i + 2];
    if (/[A-Za-z0-9]/.test(e)) fail(where, `unsupported escape \\${e} in /${re}/`);
    return [{ lua: luaLiteral(e) }, i + 2];
  }
  if (ch === '.')
    fail(where, `. differs between JS (not a line end) and Lua (any byte): write [^\\n\\r] in /${re}/`);
  if (ch === '[') {
    let j = i + 1;
    let out = '[';
    if (re[j] === '^') {
      out += '^';
      j++;
    }
    const start = j;
    for (; j < re.length && re[j] !== ']'; j++) {
      const c = re[j]!;
      if (c === '\\') {
        const e = re[j + 1];
        if (e === undefined) fail(where, `dangling escape in /${re}/`);
        if (SET_ESCAPE_CLASSES[e]) out += SET_ESCAPE_CLASSES[e];
        else if (CONTROL_ESCAPES[e]) out += CONTROL_ESCAPES[e];
        else if (/[A-Za-z0-9]/.test(e)) fail(where, `unsupported escape \\${e} in a set in /${re}/`);
        else out += luaLiteral(e);
        j++;
      } else if (c === '-') {
        // A range between two plain characters stays a range; a leading/trailing dash is literal.
        const isRange = j > start && re[j + 1] !== undefined && re[j + 1] !== ']';
        out += isRange ? '-' : '%-';
      } else if (c === '%' || c === '[' || c === '^') out += `%${c}`;
      else out += c;
    }
    if (re[j] !== ']') fail(where, `unterminated set in /${re}/`);
    return [{ lua: `${out}]` }, j + 1];
  }
  if ('()|'.includes(ch)) fail(where, `groups and alternation are only supported as ^(a|b)$ in /${re}/`);
  if ('*+?{'.includes(ch)) fail(where, `quantifier without an atom in /${re}/`);
  return [{ lua: luaLiteral(ch) }, i + 1];
}

interface Quantified {
  atom: Atom;
  min: number;
  max: number; // Infinity for unbounded
}

function parseSequence(re: string, where: string): Quantified[] {
  const out: Quantified[] = [];
  let i = 0;
  while (i < re.length) {
    const [atom, next] = parseAtom(re, i, where);
    i = next;
    let min = 1;
    let max = 1;
    const q = re[i];
    if (q === '?') [min, max, i] = [0, 1, i + 1];
    else if (q === '*') [min, max, i] = [0, Infinity, i + 1];
    else if (q === '+') [min, max, i] = [1, Infinity, i + 1];
    else if (q === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(re.slice(i));
      if (!m) fail(where, `bad counted repetition in /${re}/`);
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      i += m[0].length;
    }
    if (re[i] === '?') fail(where, `lazy quantifiers are not supported in /${re}/`);
    out.push({ atom, min, max });
  }
  return out;
}

function renderSequence(seq: Quantified[], where: string, re: string): string {
  let out = '';
  for (const { atom, min, max } of seq) {
    if (min === 1 && max === 1) out += atom.lua;
    else if (min === 0 && max === 1) out += `${atom.lua}?`;
    else if (max === Infinity)
      out += atom.lua.repeat(Math.max(0, min - 1)) + atom.lua + (min === 0 ? '*' : '+');
    else {
      if (max - min > MAX_EXPANSION)
        fail(where, `repetition {${min},${max}} is too wide to expand in /${re}/`);
      out += atom.lua.repeat(min) + `${atom.lua}?`.repeat(max - min);
    }
  }
  return out;
}

export interface LuaMatch {
  match?: string;
  match_any?: KongMatchAny;
  len_min?: number;
  len_max?: number;
}

/**
 * Converts a JSON-Schema `pattern` (unanchored ECMAScript regex; Kong's `match` is an unanchored Lua search
 * too) into Lua pattern(s). `^(a|b)$` becomes match_any; `^X{m,n}$` over one atom becomes `^X+$` plus length
 * bounds. Throws KINF_ERR_INTERNAL for anything it cannot translate exactly.
 */
export function regexToLua(re: string, where = 'pattern'): LuaMatch {
  const anchoredStart = re.startsWith('^');
  const anchoredEnd = re.endsWith('$') && !re.endsWith('\\$');
  const body = re.slice(anchoredStart ? 1 : 0, anchoredEnd ? -1 : undefined);
  const pre = anchoredStart ? '^' : '';
  const post = anchoredEnd ? '$' : '';

  const alt = /^\((?!\?)(.*)\)$/.exec(body);
  if (alt && !/[()]/.test(alt[1]!)) {
    const branches = alt[1]!.split('|');
    if (branches.some((b) => b.endsWith('\\'))) fail(where, `escaped | is not supported in /${re}/`);
    const patterns = branches.map((b) => pre + renderSequence(parseSequence(b, where), where, re) + post);
    if (patterns.length === 1) return { match: patterns[0]! };
    return { match_any: { patterns, err: `must match ${re}` } };
  }
  const seq = parseSequence(body, where);
  const only = seq.length === 1 ? seq[0]! : undefined;
  if (only && anchoredStart && anchoredEnd && only.max !== Infinity && only.max - only.min > MAX_EXPANSION) {
    const out: LuaMatch = { match: `^${only.atom.lua}${only.min === 0 ? '*' : '+'}$` };
    if (only.min > 0) out.len_min = only.min;
    out.len_max = only.max;
    return out;
  }
  return { match: pre + renderSequence(seq, where, re) + post };
}

// ---------------------------------------------------------------------------------------------------------

function kindOf(s: Schema): string {
  return String((s as unknown as Record<symbol, unknown>)[Kind] ?? '');
}

function literalUnion(s: Schema): (string | number)[] | null {
  if (kindOf(s) !== 'Union') return null;
  const anyOf = s.anyOf as Schema[];
  const values: (string | number)[] = [];
  for (const member of anyOf) {
    if (kindOf(member) !== 'Literal') return null;
    const c = member.const;
    if (typeof c !== 'string' && typeof c !== 'number') return null;
    values.push(c);
  }
  return values;
}

function checkDescription(where: string, d: unknown): string {
  if (typeof d !== 'string')
    fail(where, 'every top-level field needs a description (Kong shows it to users)');
  if (d.length < DESCRIPTION_MIN || d.length > DESCRIPTION_MAX)
    fail(where, `description must be ${DESCRIPTION_MIN}–${DESCRIPTION_MAX} characters (has ${d.length})`);
  return d;
}

function bounds(s: Schema, f: KongField): void {
  const lo = typeof s.minimum === 'number' ? s.minimum : undefined;
  const hi = typeof s.maximum === 'number' ? s.maximum : undefined;
  if (lo !== undefined || hi !== undefined)
    f.between = [lo ?? Number.MIN_SAFE_INTEGER, hi ?? Number.MAX_SAFE_INTEGER] as [number, number];
}

/**
 * Kong says a failed `match` as "invalid value: …" and a failed `match_any` by its err (a regex by default):
 * a field with `x-expected` words gets them instead (config/validate.ts says the same).
 */
function sayInWords(f: KongField, words: string): void {
  if (f.match !== undefined) {
    f.match_any = { patterns: [f.match], err: `expected ${words}` };
    delete f.match;
  } else if (f.match_any) f.match_any.err = `expected ${words}`;
}

function toField(s: Schema, where: string): KongField {
  const literals = literalUnion(s);
  let f: KongField;
  if (literals) {
    const allStrings = literals.every((v) => typeof v === 'string');
    f = { type: allStrings ? 'string' : 'number', one_of: literals };
  } else {
    switch (kindOf(s)) {
      case 'String': {
        f = { type: 'string' };
        const xk = s['x-kong'] as Record<string, unknown> | undefined;
        const explicit = xk !== undefined && ('match' in xk || 'match_any' in xk);
        if (typeof s.pattern === 'string' && !explicit) Object.assign(f, regexToLua(s.pattern, where));
        if (typeof s['x-expected'] === 'string' && !explicit) sayInWords(f, s['x-expected']);
        if (typeof s.minLength === 'number') f.len_min = Math.max(s.minLength, f.len_min ?? 0);
        if (typeof s.maxLength === 'number') f.len_max = Math.min(s.maxLength, f.len_max ?? Infinity);
        break;
      }
      case 'Integer':
        f = { type: 'integer' };
        bounds(s, f);
        break;
      case 'Number':
        f = { type: 'number' };
        bounds(s, f);
        break;
      case 'Boolean':
        f = { type: 'boolean' };
        break;
      case 'Array':
        f = { type: 'array', elements: toField(s.items as Schema, `${where}[]`) };
        if (typeof s.minItems === 'number') f.len_min = s.minItems;
        if (typeof s.maxItems === 'number') f.len_max = s.maxItems;
        break;
      case 'Record': {
        const pp = s.patternProperties as Record<string, Schema>;
        const [keyPattern, value] = Object.entries(pp)[0] ?? fail(where, 'record without a value schema');
        const keys: KongField = { type: 'string' };
        if (keyPattern !== '^(.*)$' && keyPattern !== '^.*$')
          Object.assign(keys, regexToLua(keyPattern, where));
        f = { type: 'map', keys, values: toField(value, `${where}{}`) };
        break;
      }
      case 'Object':
        f = { type: 'record', fields: toFields(s as unknown as TObject, where, false) };
        break;
      default:
        fail(where, `no Kong mapping for TypeBox kind ${kindOf(s) || '(none)'}`);
    }
  }
  if (s.default !== undefined) f.default = s.default;
  const xk = s['x-kong'];
  if (xk && typeof xk === 'object') Object.assign(f, xk);
  return f;
}

function toFields(obj: TObject, where: string, topLevel: boolean): KongFieldEntry[] {
  const required = new Set(obj.required ?? []);
  return Object.entries(obj.properties).map(([name, prop]) => {
    const s = prop as Schema;
    const path = where ? `${where}.${name}` : name;
    const f = toField(s, path);
    // Kong fills defaults for absent fields, so a required field with a default never fails for absence.
    f.required = required.has(name);
    if (topLevel || s.description !== undefined) f.description = checkDescription(path, s.description);
    return { [name]: orderKeys(f) };
  });
}

const KEY_ORDER: (keyof KongField)[] = [
  'type',
  'required',
  'default',
  'one_of',
  'between',
  'len_min',
  'len_max',
  'match',
  'match_any',
  'elements',
  'keys',
  'values',
  'fields',
  'referenceable',
  'encrypted',
  'description',
];

/** Stable key order, so the generated files diff cleanly. */
function orderKeys(f: KongField): KongField {
  const out: Record<string, unknown> = {};
  for (const k of KEY_ORDER) if (f[k] !== undefined) out[k] = f[k];
  for (const [k, v] of Object.entries(f)) if (!(k in out) && v !== undefined) out[k] = v;
  return out as unknown as KongField;
}

/** The JS plugin's `Schema` export: Kong's field list for the plugin's `config` record. */
export function toKongSchema(schema: TObject): KongFieldEntry[] {
  return toFields(schema, '', true);
}

/** The full plugin schema as kong-js-pluginserver reports it (GetPluginInfo / --dump-all-plugins). */
export function toKongPluginSchema(name: string, schema: TObject): KongPluginSchema {
  return { name, fields: [{ config: { type: 'record', fields: toKongSchema(schema) } }] };
}
