/**
 * JSON as vLLM's Python reads and prints it, for error texts that must match vLLM's: the document as
 * `json.loads` decodes it (its error message and position, NaN and Infinity), the decoded value as `repr`
 * prints it (pydantic's error lists quote the request with repr), and `json.dumps`' default text (vLLM's
 * streamed error chunks). Everything here runs on the error path only; requests that parse go through
 * JSON.parse.
 */
import { pythonFloatRepr } from '../../src/core/python-json.js';
import { pyStrip, pyStrRepr } from '../../src/core/python-str.js';

export { pyStrRepr };

/** A Python int (JSON integer literals are exact, however long). */
export class PyInt {
  constructor(readonly value: bigint) {}
}

/** A Python float: a JSON literal with a fraction or an exponent, NaN, Infinity or -Infinity. */
export class PyFloat {
  constructor(readonly value: number) {}
}

export type PyDict = Map<string, PyValue>;
export type PyValue = null | boolean | string | PyInt | PyFloat | PyValue[] | PyDict;

/**
 * `json.loads` of a body: the value; or, for an invalid document, JSONDecodeError's `msg` and `pos`; or
 * `decodeError: false` for its other errors (an integer of more than 4300 digits, nesting past
 * MAX_JSON_DEPTH), which FastAPI answers alike.
 */
export type PyLoads =
  | { ok: true; value: PyValue }
  | { ok: false; decodeError: true; msg: string; pos: number }
  | { ok: false; decodeError: false };

/** Python's int() refuses longer digit strings (sys.int_info.default_max_str_digits). */
const MAX_INT_DIGITS = 4300;

/** An int literal over MAX_INT_DIGITS: json.loads raises a plain ValueError. */
class TooManyDigits extends Error {}

/**
 * The deepest nesting of arrays and objects json.loads takes before it raises RecursionError: each level is
 * one C-level recursion, and CPython 3.12 (vLLM's image) allows 1500 of them, of which the server's own
 * frames use a few (1497 levels parse at the top of a script, 1493 inside an asyncio task; the exact count
 * under vLLM's server shifts by a few with its call stack).
 */
export const MAX_JSON_DEPTH = 1490;

/** Nesting past MAX_JSON_DEPTH: json.loads raises RecursionError, which is no JSONDecodeError. */
class TooDeep extends Error {}

class Decode extends Error {
  constructor(
    readonly msg: string,
    readonly at: number,
  ) {
    super(msg);
  }
}

/** json's StopIteration: no value starts here (reported as "Expecting value"). */
class NoValue extends Error {
  constructor(readonly at: number) {
    super('no value');
  }
}

const isWs = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
const hexValue = (c: number): number =>
  isDigit(c) ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/**
 * CPython's json scanner (the C one, `_json.c`, which `json.loads` uses), as of Python 3.12: the same values,
 * and for invalid documents the same message and position. Works on UTF-16 units; positions are converted
 * to Python's code-point indexes at the end.
 */
class Scanner {
  readonly #s: string;
  readonly #end: number;
  #depth = 0;

  constructor(s: string) {
    this.#s = s;
    this.#end = s.length - 1;
  }

  #c(i: number): number {
    return this.#s.charCodeAt(i);
  }

  #skipWs(i: number): number {
    while (i <= this.#end && isWs(this.#c(i))) i++;
    return i;
  }

  #startsWith(lit: string, i: number): boolean {
    return this.#s.startsWith(lit, i);
  }

  document(): PyValue {
    const start = this.#skipWs(0);
    let value: PyValue;
    let next: number;
    try {
      [value, next] = this.#value(start);
    } catch (e) {
      if (e instanceof NoValue) throw new Decode('Expecting value', e.at);
      throw e;
    }
    const end = this.#skipWs(next);
    if (end !== this.#s.length) throw new Decode('Extra data', end);
    return value;
  }

  #value(i: number): [PyValue, number] {
    if (i > this.#end) throw new NoValue(i);
    switch (this.#s[i]) {
      case '"':
        return this.#string(i + 1);
      case '{':
        return this.#object(i + 1);
      case '[':
        return this.#array(i + 1);
      case 'n':
        if (this.#startsWith('null', i)) return [null, i + 4];
        break;
      case 't':
        if (this.#startsWith('true', i)) return [true, i + 4];
        break;
      case 'f':
        if (this.#startsWith('false', i)) return [false, i + 5];
        break;
      case 'N':
        if (this.#startsWith('NaN', i)) return [new PyFloat(Number.NaN), i + 3];
        break;
      case 'I':
        if (this.#startsWith('Infinity', i)) return [new PyFloat(Number.POSITIVE_INFINITY), i + 8];
        break;
      case '-':
        if (this.#startsWith('-Infinity', i)) return [new PyFloat(Number.NEGATIVE_INFINITY), i + 9];
        break;
    }
    return this.#number(i);
  }

  #number(start: number): [PyValue, number] {
    let i = start;
    if (this.#c(i) === 0x2d) {
      i++;
      if (i > this.#end) throw new NoValue(start);
    }
    const first = this.#c(i);
    if (first >= 0x31 && first <= 0x39) {
      i++;
      while (i <= this.#end && isDigit(this.#c(i))) i++;
    } else if (first === 0x30) i++;
    else throw new NoValue(start);
    let float = false;
    if (i < this.#end && this.#c(i) === 0x2e && isDigit(this.#c(i + 1))) {
      float = true;
      i += 2;
      while (i <= this.#end && isDigit(this.#c(i))) i++;
    }
    if (i < this.#end && (this.#c(i) === 0x65 || this.#c(i) === 0x45)) {
      const eStart = i;
      i++;
      if (i < this.#end && (this.#c(i) === 0x2d || this.#c(i) === 0x2b)) i++;
      while (i <= this.#end && isDigit(this.#c(i))) i++;
      if (isDigit(this.#c(i - 1))) float = true;
      else i = eStart;
    }
    const text = this.#s.slice(start, i);
    if (float) return [new PyFloat(Number(text)), i];
    if (text.replace('-', '').length > MAX_INT_DIGITS) throw new TooManyDigits();
    return [new PyInt(BigInt(text)), i];
  }

  #string(end: number): [string, number] {
    const begin = end - 1;
    const s = this.#s;
    const len = s.length;
    let out = '';
    for (;;) {
      let next = end;
      let c = 0;
      for (; next < len; next++) {
        c = this.#c(next);
        if (c === 0x22 || c === 0x5c) break;
        if (c <= 0x1f) throw new Decode('Invalid control character at', next);
      }
      if (next >= len) throw new Decode('Unterminated string starting at', begin);
      out += s.slice(end, next);
      if (c === 0x22) return [out, next + 1];
      next++; // past the backslash
      if (next === len) throw new Decode('Unterminated string starting at', begin);
      const e = s[next] as string;
      if (e !== 'u') {
        end = next + 1;
        const ch = SIMPLE_ESCAPES[e];
        if (ch === undefined) throw new Decode('Invalid \\escape', end - 2);
        out += ch;
        continue;
      }
      next++;
      end = next + 4;
      if (end >= len) throw new Decode('Invalid \\uXXXX escape', next - 1);
      let u = 0;
      for (; next < end; next++) {
        const d = hexValue(this.#c(next));
        if (d < 0) throw new Decode('Invalid \\uXXXX escape', end - 5);
        u = (u << 4) | d;
      }
      if (u >= 0xd800 && u <= 0xdbff && end + 6 < len && s[next] === '\\' && s[next + 1] === 'u') {
        next += 2;
        end += 6;
        let u2 = 0;
        for (; next < end; next++) {
          const d = hexValue(this.#c(next));
          if (d < 0) throw new Decode('Invalid \\uXXXX escape', end - 5);
          u2 = (u2 << 4) | d;
        }
        if (u2 >= 0xdc00 && u2 <= 0xdfff) u = 0x10000 + ((u - 0xd800) << 10) + (u2 - 0xdc00);
        else end -= 6;
      }
      out += String.fromCodePoint(u);
    }
  }

  #enter(): void {
    if (++this.#depth > MAX_JSON_DEPTH) throw new TooDeep();
  }

  #object(i: number): [PyDict, number] {
    this.#enter();
    const out: PyDict = new Map();
    i = this.#skipWs(i);
    if (i > this.#end || this.#c(i) !== 0x7d) {
      for (;;) {
        if (i > this.#end || this.#c(i) !== 0x22)
          throw new Decode('Expecting property name enclosed in double quotes', i);
        const [key, afterKey] = this.#string(i + 1);
        i = this.#skipWs(afterKey);
        if (i > this.#end || this.#c(i) !== 0x3a) throw new Decode("Expecting ':' delimiter", i);
        i = this.#skipWs(i + 1);
        const [value, afterValue] = this.#value(i);
        // A repeated key keeps its first place and takes the last value, as a dict does.
        out.set(key, value);
        i = this.#skipWs(afterValue);
        if (i <= this.#end && this.#c(i) === 0x7d) break;
        if (i > this.#end || this.#c(i) !== 0x2c) throw new Decode("Expecting ',' delimiter", i);
        i = this.#skipWs(i + 1);
      }
    }
    this.#depth--;
    return [out, i + 1];
  }

  #array(i: number): [PyValue[], number] {
    this.#enter();
    const out: PyValue[] = [];
    i = this.#skipWs(i);
    if (i > this.#end || this.#c(i) !== 0x5d) {
      for (;;) {
        const [value, next] = this.#value(i);
        out.push(value);
        i = this.#skipWs(next);
        if (i <= this.#end && this.#c(i) === 0x5d) break;
        if (i > this.#end || this.#c(i) !== 0x2c) throw new Decode("Expecting ',' delimiter", i);
        i = this.#skipWs(i + 1);
      }
    }
    this.#depth--;
    return [out, i + 1];
  }
}

/** A UTF-16 index as Python's string index (code points: an astral character counts once). */
function codePointIndex(s: string, utf16: number): number {
  let pairs = 0;
  for (let i = 0; i < utf16 - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        pairs++;
        i++;
      }
    }
  }
  return utf16 - pairs;
}

/**
 * The deepest nesting of arrays and objects in a document JSON.parse took, without recursion (V8's parser
 * takes any depth; json.loads does not).
 */
export function jsonNestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) max = depth;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

/** `json.loads(text)`: the value, or JSONDecodeError's `msg` and `pos`. */
export function pyLoads(text: string): PyLoads {
  try {
    return { ok: true, value: new Scanner(text).document() };
  } catch (e) {
    if (e instanceof Decode)
      return { ok: false, decodeError: true, msg: e.msg, pos: codePointIndex(text, e.at) };
    if (e instanceof TooManyDigits || e instanceof TooDeep) return { ok: false, decodeError: false };
    throw e;
  }
}

/** The JS value JSON.parse would give (NaN and ±Infinity as numbers, which JSON.parse cannot give). */
export function pyToJs(v: PyValue): unknown {
  if (v instanceof PyInt) return Number(v.value);
  if (v instanceof PyFloat) return v.value;
  if (Array.isArray(v)) return v.map(pyToJs);
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    // defineProperty: a "__proto__" key is an own property, as JSON.parse makes it.
    for (const [k, x] of v)
      Object.defineProperty(out, k, {
        value: pyToJs(x),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  }
  return v;
}

/** A JS value as Python would hold it (an integral number is an int; used where the body text is gone). */
export function jsToPy(v: unknown): PyValue {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean' || typeof v === 'string') return v;
  if (typeof v === 'number')
    return Number.isSafeInteger(v) || (Number.isInteger(v) && Math.abs(v) < 1e21)
      ? new PyInt(BigInt(v))
      : new PyFloat(v);
  if (Array.isArray(v)) return v.map(jsToPy);
  if (typeof v === 'object') {
    const out: PyDict = new Map();
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out.set(k, jsToPy(x));
    return out;
  }
  return String(v);
}

/** The value at a path of dict keys and list indexes (undefined when the path leaves the document). */
export function pyAt(v: PyValue, path: readonly (string | number)[]): PyValue | undefined {
  let cur: PyValue | undefined = v;
  for (const k of path) {
    if (cur instanceof Map && typeof k === 'string') cur = cur.get(k);
    else if (Array.isArray(cur) && typeof k === 'number') cur = cur[k];
    else return undefined;
    if (cur === undefined) return undefined;
  }
  return cur;
}

/** Python's type() name of a decoded JSON value, as an AttributeError or TypeError names it. */
export function pyTypeName(v: unknown): string {
  if (v === null || v === undefined) return 'NoneType';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  if (typeof v === 'string') return 'str';
  if (Array.isArray(v)) return 'list';
  return 'dict';
}

function floatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  return pythonFloatRepr(x);
}

/** repr() of a decoded JSON value. */
export function pyRepr(v: PyValue): string {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return pyStrRepr(v);
  if (v instanceof PyInt) return v.value.toString();
  if (v instanceof PyFloat) return floatRepr(v.value);
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  return `{${[...v].map(([k, x]) => `${pyStrRepr(k)}: ${pyRepr(x)}`).join(', ')}}`;
}

/** str() of a decoded JSON value: a string as is, anything else as repr. */
export function pyStr(v: PyValue): string {
  return typeof v === 'string' ? v : pyRepr(v);
}

/** repr() of a tuple of str and int (a pydantic `loc`): `('body',)`, `('body', 'prompt', 0)`. */
export function pyTupleRepr(items: readonly (string | number)[]): string {
  const parts = items.map((x) => (typeof x === 'number' ? String(x) : pyStrRepr(x)));
  return parts.length === 1 ? `(${parts[0]},)` : `(${parts.join(', ')})`;
}

function dumpsString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c < 0x20 || c > 0x7e) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += s[i];
  }
  return out + '"';
}

/**
 * `json.dumps(value)` with its defaults: `", "` and `": "` separators, non-ASCII as \uXXXX escapes (UTF-16
 * units, as Python writes astral characters). For the JSON values an error body holds.
 */
export function pyJsonDumps(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : pythonFloatRepr(v);
  if (typeof v === 'string') return dumpsString(v);
  if (Array.isArray(v)) return `[${v.map(pyJsonDumps).join(', ')}]`;
  return `{${Object.entries(v as Record<string, unknown>)
    .map(([k, x]) => `${dumpsString(k)}: ${pyJsonDumps(x)}`)
    .join(', ')}}`;
}

/** Python's `int(text)` for a base-10 string (header values): null where int() raises ValueError. */
export function pyInt(text: string): bigint | null {
  const t = pyStrip(text, null, true, true);
  if (!/^[+-]?[0-9]+(?:_[0-9]+)*$/.test(t)) return null;
  return BigInt(t.replaceAll('_', ''));
}
