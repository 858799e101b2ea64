// Words that are exactly one token with a leading space, read from a byte-level tokenizer.json.
import { readFileSync } from 'node:fs';
import type { Tokenizer } from '../../../src/tokenize/types.js';

/**
 * Words that are exactly one token with a leading space (" river"), read from a byte-level BPE
 * tokenizer.json ("Ġ" is the byte-level space). Text made of such words has a token count known in
 * advance: the pre-tokenizer splits at every space and each piece is one vocabulary entry. The emulator
 * samples output from the same ids, so a reply decodes to text that re-tokenizes to the same ids, as a
 * model's own words would.
 */
export interface WordVocab {
  ids: number[];
  words: string[];
}

const WORD = /^Ġ[a-z]{3,9}$/;

export async function loadWordVocab(
  tokenizerJsonPath: string,
  tokenizer: Tokenizer,
  max = 4096,
): Promise<WordVocab> {
  const json = JSON.parse(readFileSync(tokenizerJsonPath, 'utf8')) as {
    model?: { vocab?: Record<string, number> };
  };
  const vocab = json.model?.vocab ?? {};
  const candidates = Object.entries(vocab)
    .filter(([t]) => WORD.test(t))
    .sort((a, b) => a[1] - b[1])
    .slice(0, max * 2);
  const ids: number[] = [];
  const words: string[] = [];
  // Keep only words the real tokenizer encodes to exactly that one id (BPE need not pick a whole-word entry).
  const checked = await Promise.all(
    candidates.map(async ([t, id]) => {
      const word = ' ' + t.slice(1);
      const enc = await tokenizer.encodeOrdinary(word);
      return enc.length === 1 && enc[0] === id ? { id, word } : null;
    }),
  );
  for (const c of checked) {
    if (c === null || ids.length >= max) continue;
    ids.push(c.id);
    words.push(c.word);
  }
  if (ids.length < 256) throw new Error(`${tokenizerJsonPath}: only ${ids.length} single-token words found`);
  return { ids, words };
}
