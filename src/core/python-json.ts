// JSON numbers as vLLM's Python reads and prints them (1.0, big ints), so templates render them the same.
import { parse } from 'lossless-json';

/**
 * JSON numbers as vLLM's Python sees them. json.loads makes `1.0` a float and `12345678901234567890` an exact
 * int, and the chat template's tojson prints them back as `1.0` and every digit; JSON.parse makes both a JS
 * number, which the template prints as `1` and `12345678901234567000`. In a tool schema or tool-call
 * arguments that changes the prompt's tokens, and every block key from there on. So where the two differ, the
 * number is carried as a marker string holding Python's text, and the rendered prompt gets that text back
 * (restorePythonNumbers), whichever way the template printed it.
 */

const MARK = '\u0000kinf-py:';
const END = '\u0000';
// The marker as tojson prints a string ("\u0000…\u0000", quoted), or as printed raw.
const QUOTED = /"\\u0000kinf-py:([-+.0-9A-Za-z]+)\\u0000"/g;
// eslint-disable-next-line no-control-regex -- the marker's NULs are what make it unlike any prompt text
const RAW = /\u0000kinf-py:([-+.0-9A-Za-z]+)\u0000/g;

const marker = (python: string): string => `${MARK}${python}${END}`;

/** repr(float), which json.dumps uses: shortest round-trip digits, exponent form below 1e-4 and from 1e16. */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  // toExponential() without digits is the shortest string that reads back as x, as repr's.
  const [mantissa, expText] = x.toExponential().split('e') as [string, string];
  const exp = Number(expText);
  const sign = mantissa.startsWith('-') ? '-' : '';
  const digits = mantissa.replace('-', '').replace('.', '');
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  const whole = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
  return `${sign}${whole}.${digits.slice(exp + 1) || '0'}`;
}

/** A JSON number literal as json.loads reads it: a JS number where it prints the same, else a marker. */
function pythonNumber(text: string): unknown {
  if (/^-?\d+$/.test(text)) {
    const n = Number(text);
    return Number.isSafeInteger(n) ? n + 0 : marker(BigInt(text).toString()); // + 0: Python has no int -0
  }
  const x = Number(text);
  const python = pythonFloatRepr(x);
  return python === JSON.stringify(x) ? x : marker(python);
}

/**
 * Parses JSON keeping Python's view of its numbers (see above). lossless-json refuses a duplicate key, where
 * json.loads keeps the last as JSON.parse does: such a text gets JSON.parse's numbers. Throws on invalid JSON.
 */
export function parsePythonJson(text: string): unknown {
  try {
    return parse(text, null, pythonNumber);
  } catch {
    return JSON.parse(text);
  }
}

/**
 * A cheap test for literals whose Python and JS printing may differ (`1.0`, `0.00001`, `1e5`, 16 digits and
 * more); false positives only cost a second parse.
 */
const DIFFERING = /\d\.\d*0(?!\d)|\.0000|\d[eE][-+]?\d|\d{16}/;

export function mayHavePythonNumbers(text: string): boolean {
  return DIFFERING.test(text);
}

const ONE = new RegExp(`^${RAW.source}$`);

/** Whether a string is exactly one such marker (a number, which repr() prints unquoted). */
export function isPythonNumberMarker(s: string): boolean {
  return s.startsWith(MARK) && ONE.test(s);
}

/** Puts Python's text back where a marker was printed. */
export function restorePythonNumbers(rendered: string): string {
  if (!rendered.includes('kinf-py:')) return rendered;
  return rendered.replace(QUOTED, '$1').replace(RAW, '$1');
}
