/**
 * Lua patterns (what Kong's `match`/`match_any` validators use, via string.find) → ECMAScript RegExp, so the
 * stand-in validates plugin config the way Kong would. Supports the whole Lua 5.1 pattern language except
 * back-references (%1), balanced matches (%b) and frontier patterns (%f), which Kong schemas do not use.
 */

const CLASS: Record<string, string> = {
  a: 'A-Za-z',
  c: '\\x00-\\x1f\\x7f',
  d: '0-9',
  g: '\\x21-\\x7e',
  l: 'a-z',
  p: '!-/:-@\\[-`{-~',
  s: '\\t\\n\\v\\f\\r ',
  u: 'A-Z',
  w: 'A-Za-z0-9',
  x: '0-9A-Fa-f',
};

function escapeRe(ch: string): string {
  return /[\\^$.*+?()[\]{}|/-]/.test(ch) ? `\\${ch}` : ch;
}

/** `%x` inside or outside a set → the RegExp set body, and whether it is complemented. */
function classBody(letter: string): { body: string; negated: boolean } | null {
  const lower = letter.toLowerCase();
  const body = CLASS[lower];
  if (!body) return null;
  return { body, negated: letter !== lower };
}

export function luaPatternToRegExp(pattern: string): RegExp {
  let out = '';
  let i = 0;
  if (pattern.startsWith('^')) {
    out += '^';
    i = 1;
  }
  while (i < pattern.length) {
    const ch = pattern[i]!;
    let atom: string;
    if (ch === '%') {
      const e = pattern[i + 1];
      if (e === undefined) throw new Error(`malformed Lua pattern (ends with '%'): ${pattern}`);
      if (e === 'b' || e === 'f' || /[0-9]/.test(e)) throw new Error(`unsupported Lua pattern item %${e}`);
      const cls = classBody(e);
      atom = cls ? (cls.negated ? `[^${cls.body}]` : `[${cls.body}]`) : escapeRe(e);
      i += 2;
    } else if (ch === '[') {
      let j = i + 1;
      let set = '[';
      if (pattern[j] === '^') {
        set += '^';
        j++;
      }
      let first = true;
      while (j < pattern.length && (first || pattern[j] !== ']')) {
        const c = pattern[j]!;
        first = false;
        if (c === '%') {
          const e = pattern[j + 1];
          if (e === undefined) throw new Error(`malformed Lua pattern: ${pattern}`);
          const cls = classBody(e);
          // RegExp sets cannot nest a complement; Kong schemas never put %S-style classes in a set.
          if (cls?.negated) throw new Error(`unsupported Lua pattern item %${e} inside a set`);
          set += cls ? cls.body : escapeRe(e);
          j += 2;
        } else if (pattern[j + 1] === '-' && pattern[j + 2] !== undefined && pattern[j + 2] !== ']') {
          set += `${escapeRe(c)}-${escapeRe(pattern[j + 2]!)}`;
          j += 3;
        } else {
          set += escapeRe(c);
          j++;
        }
      }
      if (pattern[j] !== ']') throw new Error(`malformed Lua pattern (missing ']'): ${pattern}`);
      atom = `${set}]`;
      i = j + 1;
    } else if (ch === '.') {
      atom = '[\\s\\S]';
      i++;
    } else if (ch === '$' && i === pattern.length - 1) {
      out += '$';
      i++;
      continue;
    } else {
      atom = escapeRe(ch);
      i++;
    }
    const q = pattern[i];
    if (q === '*' || q === '+' || q === '?') {
      out += atom + q;
      i++;
    } else if (q === '-') {
      out += `${atom}*?`;
      i++;
    } else out += atom;
  }
  return new RegExp(out);
}

/** Kong's `match`: true when the Lua pattern finds a match anywhere in `value` (string.find semantics). */
export function luaMatches(pattern: string, value: string): boolean {
  return luaPatternToRegExp(pattern).test(value);
}
