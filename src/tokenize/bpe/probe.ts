// The probe text our JS BPE engine must encode exactly as the native library before it is used.
import type { ByteBpe } from './byte-bpe.js';

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

/** What `Tokenizer.engine` says when the JS engine is not used, and why. */
export function nativeEngineNote(why: string): string {
  return `native (${why})`;
}

/**
 * The JS engine if it encodes the probe exactly as the native library did (`reference`), else null with a
 * warning; and the `Tokenizer.engine` note for the outcome.
 */
export function checkedEngine(
  spec: string,
  fast: ByteBpe,
  reference: ArrayLike<number>,
): { engine: ByteBpe | null; note: string } {
  const js = fast.encode(ENGINE_PROBE);
  if (js.length === reference.length && js.every((t, i) => t === reference[i]))
    return { engine: fast, note: 'js-bpe' };
  const note = nativeEngineNote('JS engine disagreed on the probe text');
  process.emitWarning(`${spec}: ${note}`, 'KinferenceWarning');
  return { engine: null, note };
}
