/**
 * Translates a pre-tokenizer regex written for Rust `regex`/fancy-regex (tiktoken) or Oniguruma (HF
 * tokenizers) into an equivalent JavaScript RegExp, or returns null when the pattern uses anything whose
 * meaning differs between the engines (then the native tokenizer is used instead).
 *
 * The differences handled: `\s` is Unicode White_Space in Rust and Oniguruma but JS adds U+FEFF and omits
 * U+0085; inline `(?i:…)` groups are unsupported on Node 20; `(?i)` folds `s`→ſ and `k`→K (Kelvin sign).
 */

const WS = '\\p{White_Space}';
const NOT_WS = '\\P{White_Space}';
const FOLD: Readonly<Record<string, string>> = { s: 'sS\u017f', k: 'kK\u212a' };

/** Expands a case-insensitive group body made only of literal ASCII letters, apostrophes and `|`. */
function foldGroup(body: string): string | null {
  if (!/^['a-zA-Z|]*$/.test(body)) return null;
  let out = '';
  for (const ch of body) {
    if (ch === '|' || ch === "'") {
      out += ch;
      continue;
    }
    const lower = ch.toLowerCase();
    out += `[${FOLD[lower] ?? lower + lower.toUpperCase()}]`;
  }
  return `(?:${out})`;
}

export function toJsPattern(source: string): RegExp | null {
  let out = '';
  let inClass = false;
  let afterQuantifier = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    const quantified: boolean = afterQuantifier;
    afterQuantifier = false;
    if (c === '\\') {
      const e = source[i + 1];
      if (e === undefined) return null;
      if (e === 's') out += WS;
      else if (e === 'S') out += NOT_WS;
      // Classes whose Unicode meaning differs between engines (or is ASCII-only in JS).
      else if ('wWdDbBhHRXKGAzZ'.includes(e)) return null;
      else if (e === 'p' || e === 'P') {
        const m = /^\\[pP]\{[A-Za-z_]+\}/.exec(source.slice(i));
        if (!m) return null;
        out += m[0];
        i += m[0].length - 2;
      } else out += c + e;
      i++;
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === ']') inClass = false;
    // `.` excludes only \n in Rust but also \r, U+2028 and U+2029 in JS.
    else if (c === '.' && !inClass) return null;
    else if (c === '(' && !inClass && source[i + 1] === '?') {
      const rest = source.slice(i);
      if (rest.startsWith('(?i:')) {
        const close = rest.indexOf(')');
        const folded = close < 0 ? null : foldGroup(rest.slice(4, close));
        if (folded === null) return null;
        out += folded;
        i += close;
        continue;
      }
      if (!rest.startsWith('(?:') && !rest.startsWith('(?=') && !rest.startsWith('(?!')) return null;
    } else if (!inClass && '+*?'.includes(c)) {
      // Possessive quantifiers (`a++`, `a*+`, `a{2}+`) have no JS equivalent; lazy `a+?` means the same.
      if (quantified && c === '+') return null;
      afterQuantifier = !quantified;
    } else if (c === '{' && !inClass) {
      const m = /^\{\d+(,\d*)?\}/.exec(source.slice(i));
      if (m) {
        out += m[0];
        i += m[0].length - 1;
        afterQuantifier = true;
        continue;
      }
    }
    out += c;
  }
  try {
    return new RegExp(out, 'gu');
  } catch {
    return null;
  }
}
