/**
 * Text a JS tokenizer engine must encode exactly like the native library before it is used: contractions in
 * both cases and with the folding letters (ſ, K), digits of several scripts, every kind of whitespace run,
 * CJK, combining marks, emoji with modifiers, code and a long word.
 */
export const ENGINE_PROBE = [
  "It's 2026-11-30; we'LL see what'S NEW — naïve café ſ'ſ \u212aelvin. 12345 ٣٤ ½",
  'Ελληνικά, русский, 日本語のテキスト, 中文 😀👍🏽 e\u0301 ﬁ ß',
  'def f(x):\n    return x ** 2  # comment\r\n\n\n\t\t  \u00a0\u3000\u0085\ufeff end',
  '{"a": [1, 2.5e-3], "b": "<tag/>"}  //path/to/file.ts?q=1&r=2',
  'x'.repeat(80),
  'supercalifragilisticexpialidocious'.repeat(3),
].join('\n');
