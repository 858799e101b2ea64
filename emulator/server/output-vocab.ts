// What the emulated model writes: single-token words of its tokenizer, and its end-of-turn token.
import type { Tokenizer } from '../../src/tokenize/types.js';

/**
 * What the emulated model "writes": whole words that are single tokens of the model's tokenizer, so that
 * decoding token by token equals decoding the whole output, and re-tokenizing the text a client sends back
 * (multiturn) reproduces the generated ids, as it usually does with a real model.
 */
const WORDS = (
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an ' +
  'they you were her she there been one all we their has would when if so no will more can out up about ' +
  'into them some could time these two may then first any my now such like other our over only new also ' +
  'after most made well where very through back years much before good just great old way see well between ' +
  'long little world state house part case system program point group number fact life people water day ' +
  'model cache token block prefix router request latency memory value light green river music paper story'
).split(' ');

export interface OutputVocab {
  /** Token ids output is sampled from. */
  ids: number[];
  /** Decoded text of each id (the EOS and other ids map to ""). */
  text: ReadonlyMap<number, string>;
  eosTokenId: number;
}

/** The end-of-turn token: what a chat model's EOS would be for the usual templates. */
export function pickEosToken(tok: Tokenizer): number {
  for (const name of ['<|im_end|>', '<|eot_id|>', '<|return|>', '<|endoftext|>', '</s>', '<eos>']) {
    const id = tok.specialTokens.get(name);
    if (id !== undefined) return id;
  }
  return 0;
}

export async function buildOutputVocab(tok: Tokenizer): Promise<OutputVocab> {
  const eosTokenId = pickEosToken(tok);
  const ids: number[] = [];
  const text = new Map<number, string>();
  for (const w of new Set(WORDS)) {
    const s = ` ${w}`;
    const enc = await tok.encodeOrdinary(s);
    if (enc.length !== 1) continue;
    const id = enc[0] as number;
    if (id === eosTokenId || text.has(id)) continue;
    if ((await tok.decode([id])) !== s) continue;
    ids.push(id);
    text.set(id, s);
  }
  if (ids.length < 16)
    throw new Error(`tokenizer ${tok.spec}: only ${ids.length} single-token words found for output`);
  return { ids, text, eosTokenId };
}
