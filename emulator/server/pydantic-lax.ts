/**
 * The few pydantic (v2, lax mode, Python input) validators vLLM's request models use for the fields the
 * emulator reads, with pydantic-core's error types, messages and locations: int, bool, str, float, list,
 * dict, smart-mode unions, nullable, and a model of optional fields (StreamOptions).
 */
import { isRecord } from '../../src/core/is-record.js';
import { PyFloat, type PyValue } from './py-json.js';
import type { LineError, Loc } from './vllm-errors.js';

/** pydantic's union tie-break: an exact match wins at once, else the first of the best (strict > lax). */
const EXACT = 2;
const LAX = 0;

export type Checked<T> = { ok: true; value: T; exactness: number } | { ok: false; errors: LineError[] };

/**
 * The body as Python decoded it, at a path. JSON.parse keeps no difference between `1e20` (a float in
 * Python) and `100000000000000000000` (an int); the few checks that depend on it ask here.
 */
export type PyLookup = (at: Loc) => PyValue | undefined;

export interface Validator<T> {
  /** pydantic-core's name, which a union puts in an error's loc (`int`, `list[str]`, `union[…]`). */
  readonly name: string;
  check(input: unknown, at: Loc, py: PyLookup): Checked<T>;
}

/** 2^63: float_as_int's bound (i64), beyond which a float is not an int. */
const I64_BOUND = 2 ** 63;

const fail = <T>(type: string, msg: string, at: Loc, ctx?: string): Checked<T> => ({
  ok: false,
  errors: [{ type, loc: [], msg, input: { at }, ...(ctx !== undefined ? { ctx } : {}) }],
});

const under = (seg: string | number, errors: LineError[]): LineError[] =>
  errors.map((e) => ({ ...e, loc: [seg, ...e.loc] }));

const WS = /^\p{White_Space}+|\p{White_Space}+$/gu;
const JSON_INT = /^-?(?:0|[1-9][0-9]*)$/;
const MAX_INT_DIGITS = 4300;

function stripUnderscores(s: string): string | null {
  if (s.startsWith('_') || s.endsWith('_') || !s.includes('_') || s.includes('__')) return null;
  return s.replaceAll('_', '');
}

function stripLeadingZeros(s: string): string | null {
  const first = s[0];
  if (first === undefined) return null;
  if (first !== '0') return (first >= '1' && first <= '9') || first === '-' ? s : null;
  for (let i = 1; i < s.length; i++) {
    const c = s[i] as string;
    if (c === '0' || c === '_') continue;
    if ((c >= '1' && c <= '9') || c === '-') return s.slice(i);
    if (c === '.') return s.slice(i - 1);
    return null;
  }
  return s.slice(-1);
}

/** pydantic-core's clean_int_str: whitespace, a + sign, leading zeros, a `.000` tail and underscores. */
function cleanIntStr(input: string): string | null {
  const before = input.length;
  let s = input.replace(WS, '');
  if (s.startsWith('+')) {
    if (s.startsWith('+-')) return null;
    s = s.slice(1);
  }
  let negative = false;
  if (s.startsWith('-')) {
    if (s.startsWith('--') || s.startsWith('-+')) return null;
    negative = true;
    s = s.slice(1);
  }
  const stripped = stripLeadingZeros(s);
  if (stripped === null) return null;
  s = stripped;
  const dot = s.indexOf('.');
  if (dot >= 0) {
    const decimals = s.slice(dot + 1);
    if (decimals.length > 0 && /^0+$/.test(decimals)) s = s.slice(0, dot);
  }
  const noUnderscores = stripUnderscores(s);
  if (noUnderscores !== null) return (negative ? '-' : '') + noUnderscores;
  if (before === s.length) return null;
  return (negative ? '-' : '') + s;
}

/** pydantic-core's str_as_int: a JSON integer as is, else the cleaned text, else int_parsing. */
function strAsInt(s: string): bigint | 'int_parsing' | 'int_parsing_size' {
  if (JSON_INT.test(s)) return s.replace('-', '').length > MAX_INT_DIGITS ? 'int_parsing_size' : BigInt(s);
  const cleaned = cleanIntStr(s);
  if (cleaned === null || !JSON_INT.test(cleaned) || cleaned.replace('-', '').length > MAX_INT_DIGITS)
    return 'int_parsing';
  return BigInt(cleaned);
}

const INT_MSG: Record<string, string> = {
  int_type: 'Input should be a valid integer',
  int_parsing: 'Input should be a valid integer, unable to parse string as an integer',
  int_from_float: 'Input should be a valid integer, got a number with a fractional part',
  int_parsing_size: 'Unable to parse input string as an integer, exceeded maximum size',
  finite_number: 'Input should be a finite number',
};

/** `int`, or `Annotated[int, Field(ge=…)]` (pydantic names it "constrained-int"). */
export function int(ge?: number): Validator<bigint> {
  return {
    name: ge === undefined ? 'int' : 'constrained-int',
    check(v, at, py) {
      let value: bigint;
      let exactness = EXACT;
      if (typeof v === 'boolean') {
        value = v ? 1n : 0n;
        exactness = LAX;
      } else if (typeof v === 'number') {
        if (!Number.isFinite(v)) return fail('finite_number', INT_MSG.finite_number!, at);
        if (!Number.isInteger(v)) return fail('int_from_float', INT_MSG.int_from_float!, at);
        if (Math.abs(v) >= I64_BOUND && py(at) instanceof PyFloat)
          return fail('int_parsing_size', INT_MSG.int_parsing_size!, at);
        value = BigInt(v);
      } else if (typeof v === 'string') {
        const r = strAsInt(v);
        if (typeof r === 'string') return fail(r, INT_MSG[r]!, at);
        value = r;
        exactness = LAX;
      } else return fail('int_type', INT_MSG.int_type!, at);
      if (ge !== undefined && value < BigInt(ge))
        return fail(
          'greater_than_equal',
          `Input should be greater than or equal to ${ge}`,
          at,
          `{'ge': ${ge}}`,
        );
      return { ok: true, value, exactness };
    },
  };
}

const TRUE_WORDS = new Set(['1', 't', 'y', 'on', 'yes', 'true']);
const FALSE_WORDS = new Set(['0', 'f', 'n', 'no', 'off', 'false']);

export const bool: Validator<boolean> = {
  name: 'bool',
  check(v, at) {
    if (typeof v === 'boolean') return { ok: true, value: v, exactness: EXACT };
    const parsing = (): Checked<boolean> =>
      fail('bool_parsing', 'Input should be a valid boolean, unable to interpret input', at);
    if (typeof v === 'string') {
      // eq_ignore_ascii_case: only ASCII letters fold.
      const w = v.replace(/[A-Z]/g, (c) => c.toLowerCase());
      if (TRUE_WORDS.has(w)) return { ok: true, value: true, exactness: LAX };
      if (FALSE_WORDS.has(w)) return { ok: true, value: false, exactness: LAX };
      return parsing();
    }
    // An int, or a float with an int's value (float_as_int): 0 and 1 only.
    if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) < I64_BOUND) {
      if (v === 0 || v === 1) return { ok: true, value: v === 1, exactness: LAX };
      return parsing();
    }
    return fail('bool_type', 'Input should be a valid boolean', at);
  },
};

export const str: Validator<string> = {
  name: 'str',
  check: (v, at) =>
    typeof v === 'string'
      ? { ok: true, value: v, exactness: EXACT }
      : fail('string_type', 'Input should be a valid string', at),
};

export const float: Validator<number> = {
  name: 'float',
  check(v, at) {
    if (typeof v === 'number') return { ok: true, value: v, exactness: EXACT };
    if (typeof v === 'boolean') return { ok: true, value: v ? 1 : 0, exactness: LAX };
    if (typeof v === 'string') {
      const t = v.replace(WS, '');
      const x = /^[+-]?(?:inf(?:inity)?|nan)$/i.test(t)
        ? Number(t.replace(/inf(?:inity)?/i, 'Infinity').replace(/nan/i, 'NaN'))
        : /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i.test(t)
          ? Number(t)
          : null;
      if (x === null)
        return fail(
          'float_parsing',
          'Input should be a valid number, unable to parse string as a number',
          at,
        );
      return { ok: true, value: x, exactness: LAX };
    }
    return fail('float_type', 'Input should be a valid number', at);
  },
};

/** Any value (the item validation is left to the emulator's own parser). */
export const any: Validator<unknown> = {
  name: 'any',
  check: (v) => ({ ok: true, value: v, exactness: EXACT }),
};

export function list<T>(item: Validator<T>): Validator<T[]> {
  return {
    name: `list[${item.name}]`,
    check(v, at, py) {
      if (!Array.isArray(v)) return fail('list_type', 'Input should be a valid list', at);
      const out: T[] = [];
      const errors: LineError[] = [];
      let exactness = EXACT;
      (v as unknown[]).forEach((x, i) => {
        const r = item.check(x, [...at, i], py);
        if (r.ok) {
          out.push(r.value);
          exactness = Math.min(exactness, r.exactness);
        } else errors.push(...under(i, r.errors));
      });
      return errors.length > 0 ? { ok: false, errors } : { ok: true, value: out, exactness };
    },
  };
}

/** `dict[str, V]` (JSON keys are strings). */
export function dict<T>(value: Validator<T>): Validator<Record<string, T>> {
  return {
    name: `dict[str,${value.name}]`,
    check(v, at, py) {
      if (!isRecord(v)) return fail('dict_type', 'Input should be a valid dictionary', at);
      const out: Record<string, T> = {};
      const errors: LineError[] = [];
      let exactness = EXACT;
      for (const [k, x] of Object.entries(v)) {
        const r = value.check(x, [...at, k], py);
        if (r.ok) {
          out[k] = r.value;
          exactness = Math.min(exactness, r.exactness);
        } else errors.push(...under(k, r.errors));
      }
      return errors.length > 0 ? { ok: false, errors } : { ok: true, value: out, exactness };
    },
  };
}

/**
 * A smart-mode union: the first exact match, else the first of the best matches; when every member fails,
 * every member's errors, each under the member's name.
 */
export function union<T>(...members: Validator<T>[]): Validator<{ member: number; value: T }> {
  return {
    name: `union[${members.map((m) => m.name).join(',')}]`,
    check(v, at, py) {
      let best: { member: number; value: T; exactness: number } | null = null;
      const errors: LineError[] = [];
      for (let i = 0; i < members.length; i++) {
        const m = members[i] as Validator<T>;
        const r = m.check(v, at, py);
        if (r.ok) {
          if (r.exactness === EXACT)
            return { ok: true, value: { member: i, value: r.value }, exactness: EXACT };
          if (best === null || r.exactness > best.exactness)
            best = { member: i, value: r.value, exactness: r.exactness };
        } else if (best === null) errors.push(...under(m.name, r.errors));
      }
      if (best !== null)
        return { ok: true, value: { member: best.member, value: best.value }, exactness: best.exactness };
      return { ok: false, errors };
    },
  };
}

/** `X | None`: null passes (pydantic adds no loc segment for it). */
export function nullable<T>(inner: Validator<T>): Validator<T | null> {
  return {
    name: `nullable[${inner.name}]`,
    check: (v, at, py) => (v === null ? { ok: true, value: null, exactness: EXACT } : inner.check(v, at, py)),
  };
}

/** A pydantic model whose fields are all optional (extra fields allowed), validated from a dict. */
export function model<T extends Record<string, unknown>>(fields: {
  [K in keyof T]: Validator<T[K]>;
}): Validator<Partial<T>> {
  return {
    name: 'model',
    check(v, at, py) {
      // validate_python(from_attributes=True): anything but a dict is "not an object to extract fields from".
      if (!isRecord(v))
        return fail(
          'model_attributes_type',
          'Input should be a valid dictionary or object to extract fields from',
          at,
        );
      const out: Partial<T> = {};
      const errors: LineError[] = [];
      for (const k of Object.keys(fields) as (keyof T & string)[]) {
        if (!Object.hasOwn(v, k)) continue;
        const r = fields[k].check(v[k], [...at, k], py);
        if (r.ok) out[k] = r.value;
        else errors.push(...under(k, r.errors));
      }
      return errors.length > 0 ? { ok: false, errors } : { ok: true, value: out, exactness: EXACT };
    },
  };
}
