/**
 * Python's str as vLLM prints and strips it: chat templates (python-jinja.ts) and the emulator's error texts
 * (emulator/server) must produce Python's text exactly.
 */

/** What str.isspace() holds true: no U+FEFF (JS trim strips it), but U+001C-U+001F and U+0085. */
const PY_SPACE = new Set(
  '\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a' +
    '\u2028\u2029\u202f\u205f\u3000',
);

/** str.strip / lstrip / rstrip: `chars` null strips whitespace, else any of its characters. */
export function pyStrip(s: string, chars: string | null, left: boolean, right: boolean): string {
  const set = chars === null ? PY_SPACE : new Set(chars);
  // Code units suffice unless chars holds a surrogate (an astral character): its halves must not match alone.
  const units = chars === null || !/[\ud800-\udfff]/.test(chars) ? s : Array.from(s);
  const part = (i: number, j: number): string =>
    typeof units === 'string' ? units.slice(i, j) : units.slice(i, j).join('');
  let i = 0;
  let j = units.length;
  if (left) while (i < j && set.has(units[i]!)) i++;
  if (right) while (j > i && set.has(units[j - 1]!)) j--;
  return part(i, j);
}

// repr() escapes what str.isprintable() rejects: categories Cc Cf Cs Co Cn Zl Zp, and Zs but the space.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

/** repr(str): single quotes unless the text has ' and no ", escapes as unicode_repr does. */
export function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const c of s) {
    const cp = c.codePointAt(0)!;
    if (c === quote || c === '\\') out += '\\' + c;
    else if (c === '\n') out += '\\n';
    else if (c === '\r') out += '\\r';
    else if (c === '\t') out += '\\t';
    else if (c !== ' ' && UNPRINTABLE.test(c)) {
      const hex = cp.toString(16);
      out +=
        cp <= 0xff
          ? `\\x${hex.padStart(2, '0')}`
          : cp <= 0xffff
            ? `\\u${hex.padStart(4, '0')}`
            : `\\U${hex.padStart(8, '0')}`;
    } else out += c;
  }
  return out + quote;
}
