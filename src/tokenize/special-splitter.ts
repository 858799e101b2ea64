// Splits prompt text on literal special tokens, so the text between them is tokenized (and cached) apart.
import type { SpecialTokenFlags } from './types.js';

/**
 * Splits prompt text on literal special tokens with one precompiled regex. Special tokens split BPE (both
 * tiktoken with allowed_special="all" and HF's added-token extraction encode the text between them
 * independently), so a prompt's tokens are the concatenation of its pieces' tokens.
 *
 * Alternatives are ordered longest first, which makes JS's leftmost-first alternation behave like the
 * leftmost-longest matching HF's Aho-Corasick uses. HF `lstrip`/`rstrip` tokens absorb adjacent whitespace
 * and `single_word` tokens only match outside words; both are expressed in the same regex.
 */
export interface SpecialSplitter {
  /** Text pieces (strings, possibly empty only when the text is empty) and special-token ids (numbers). */
  split(text: string): (string | number)[];
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

const WORD = '[\\p{L}\\p{N}_]';

export function createSpecialSplitter(
  specials: ReadonlyMap<string, number>,
  flags?: ReadonlyMap<string, SpecialTokenFlags>,
): SpecialSplitter {
  const tokens = [...specials.keys()].filter((t) => t.length > 0).sort((a, b) => b.length - a.length);
  if (tokens.length === 0) return { split: (text) => [text] };
  const alternatives = tokens.map((t) => {
    const f = flags?.get(t);
    let re = escapeRegex(t);
    if (f?.singleWord) re = `(?<!${WORD})${re}(?!${WORD})`;
    if (f?.lstrip) re = `\\s*${re}`;
    if (f?.rstrip) re = `${re}\\s*`;
    return re;
  });
  const pattern = new RegExp(alternatives.join('|'), 'gu');
  const stripping = flags !== undefined && [...flags.values()].some((f) => f.lstrip || f.rstrip);

  const idOf = (matched: string): number => {
    const direct = specials.get(matched);
    if (direct !== undefined) return direct;
    if (stripping) {
      for (const candidate of [matched.trimStart(), matched.trimEnd(), matched.trim()]) {
        const id = specials.get(candidate);
        if (id !== undefined) return id;
      }
    }
    throw new Error(`special-token splitter matched unknown text ${JSON.stringify(matched.slice(0, 40))}`);
  };

  return {
    split(text: string): (string | number)[] {
      const out: (string | number)[] = [];
      let last = 0;
      pattern.lastIndex = 0;
      for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
        if (m.index > last) out.push(text.slice(last, m.index));
        out.push(idOf(m[0]));
        last = m.index + m[0].length;
        if (m[0].length === 0) pattern.lastIndex++;
      }
      if (last < text.length || out.length === 0) out.push(text.slice(last));
      return out;
    },
  };
}
