// The three published workloads (control, shared-prefix, multiturn): shapes and conversations.
import { Rng } from '../rng.js';
import type { WorkloadName } from '../types.js';
import type { TextSynth } from './synth.js';

/** Token counts of the three published workloads (bench.md §1.5 mapping to GuideLLM data args). */
export interface WorkloadShapes {
  control: { promptTokens: number; outputTokens: number };
  'shared-prefix': { prefixCount: number; prefixTokens: number; promptTokens: number; outputTokens: number };
  multiturn: { turns: number; firstPromptTokens: number; promptTokens: number; outputTokens: number };
}

export const PUBLISHED_SHAPES: WorkloadShapes = {
  control: { promptTokens: 16_256, outputTokens: 256 },
  'shared-prefix': { prefixCount: 24, prefixTokens: 16_000, promptTokens: 256, outputTokens: 256 },
  multiturn: { turns: 8, firstPromptTokens: 8_000, promptTokens: 400, outputTokens: 200 },
};

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** One conversation: its cluster (bootstrap level 2) and how to build each turn's new user text. */
export interface Conversation {
  id: string;
  cluster: string;
  turns: number;
  outputTokens: number;
  /** Shared-prefix workload: which of the prefixes this conversation uses (null otherwise). */
  prefixIndex: number | null;
  /** The new user message of turn k. */
  userText(turn: number): Promise<string>;
}

/**
 * Builds a trial's conversations. Fresh text per trial (the tag and the RNG stream include the trial), the
 * same for every arm of that trial: conversation i of trial t is a pure function of (seed, t, i), which is
 * what pairs the arms.
 */
export class WorkloadFactory {
  readonly #prefixes = new Map<number, Promise<string>>();

  constructor(
    readonly name: WorkloadName,
    readonly shapes: WorkloadShapes,
    readonly synth: TextSynth,
    readonly seed: number,
    readonly trial: number,
    /**
     * Replaces the trial in every prompt's tag: a run against a real fleet salts its prompts (a salt per
     * trial) so they cannot hit the cache a previous run with the same seed left (the filler, and so the
     * pairing of arms, stays the same). Salt and conversation number must both fit the first KV block.
     */
    readonly salt = '',
  ) {}

  #prefix(i: number): Promise<string> {
    let p = this.#prefixes.get(i);
    if (!p) {
      const s = this.shapes['shared-prefix'];
      p = this.synth.text(
        this.salt ? `${this.salt} p${i}` : `t${this.trial} p${i}`,
        s.prefixTokens,
        Rng.derive(this.seed, this.trial, 'prefix', i),
      );
      this.#prefixes.set(i, p);
    }
    return p;
  }

  conversation(index: number): Conversation {
    const rng = Rng.derive(this.seed, this.trial, this.name, index);
    const id = `t${this.trial}-c${index}`;
    const tag = (turn: number): string =>
      this.salt ? `${this.salt} c${index} m${turn}` : `t${this.trial} c${index} m${turn}`;
    switch (this.name) {
      case 'control': {
        const s = this.shapes.control;
        return {
          id,
          cluster: id,
          turns: 1,
          outputTokens: s.outputTokens,
          prefixIndex: null,
          userText: (turn) => this.synth.text(tag(turn), s.promptTokens, rng),
        };
      }
      case 'shared-prefix': {
        const s = this.shapes['shared-prefix'];
        // Each conversation (GuideLLM row) picks one prefix uniformly (rand.choice).
        const p = rng.int(s.prefixCount);
        return {
          id,
          cluster: `prefix-${p}`,
          turns: 1,
          outputTokens: s.outputTokens,
          prefixIndex: p,
          userText: (turn) => this.synth.text(tag(turn), s.promptTokens, rng),
        };
      }
      case 'multiturn': {
        const s = this.shapes.multiturn;
        return {
          id,
          cluster: id,
          turns: s.turns,
          outputTokens: s.outputTokens,
          prefixIndex: null,
          userText: (turn) =>
            this.synth.text(tag(turn), turn === 0 ? s.firstPromptTokens : s.promptTokens, rng),
        };
      }
    }
  }

  /** The system message of a shared-prefix conversation (GuideLLM puts the prefix in a system message). */
  async preamble(conv: Conversation): Promise<ChatMessage[]> {
    if (conv.prefixIndex === null) return [];
    return [{ role: 'system', content: await this.#prefix(conv.prefixIndex) }];
  }
}
