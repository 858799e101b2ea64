// TextSynth: token-exact prompt text, GuideLLM style (unique tag, single-token filler words).
import type { Rng } from '../rng.js';
import type { Tokenizer } from '../../../src/tokenize/types.js';
import type { WordVocab } from './vocab.js';

/**
 * Token-exact text, GuideLLM style (guidellm data/deserializers/synthetic.py): a unique tag first so no
 * two prompts share a block, then filler up to exactly `tokens` tokens. The filler is single-token words,
 * so the count is exact by construction; `exactText` checks it with the real tokenizer.
 */
export class TextSynth {
  readonly #tagTokens = new Map<string, number>();

  constructor(
    readonly tokenizer: Tokenizer,
    readonly vocab: WordVocab,
  ) {}

  /** `tokens` tokens of text starting with `tag` (digits and letters only, e.g. "t1 c42 m0"). */
  async text(tag: string, tokens: number, rng: Rng): Promise<string> {
    let tagN = this.#tagTokens.get(tag);
    if (tagN === undefined) {
      tagN = (await this.tokenizer.encodeOrdinary(tag)).length;
      this.#tagTokens.set(tag, tagN);
    }
    const n = tokens - tagN;
    if (n < 0) throw new RangeError(`tag "${tag}" is longer than ${tokens} tokens`);
    const parts: string[] = [tag];
    const words = this.vocab.words;
    for (let i = 0; i < n; i++) parts.push(words[rng.int(words.length)]!);
    return parts.join('');
  }

  /** Token count of text as the tokenizer sees it (the check behind "token-exact"). */
  async count(text: string): Promise<number> {
    return (await this.tokenizer.encodeOrdinary(text)).length;
  }
}
