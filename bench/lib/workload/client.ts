import type { ChatMessage, Conversation, WorkloadFactory } from './workloads.js';

/** One turn ready to send: the full history plus the new user message. */
export interface Turn {
  conv: Conversation;
  turn: number;
  messages: ChatMessage[];
  /** Stable across arms of a trial (conversation + turn). */
  key: string;
}

interface ConvState {
  conv: Conversation;
  history: ChatMessage[];
}

/**
 * GuideLLM's client-side conversation logic (bench.md §1.6): a follow-up turn becomes ready only when the
 * previous turn finished, with the full history including the assistant's actual reply; whoever needs a
 * request next takes a ready follow-up before starting a new conversation. Poisson arrivals call next()
 * per arrival; a concurrent stream calls next() when its previous request finished.
 */
export class ConversationClient {
  #nextIndex = 0;
  readonly #ready: ConvState[] = [];
  readonly #states = new Map<string, ConvState>();

  constructor(readonly factory: WorkloadFactory) {}

  async next(): Promise<Turn> {
    const st = this.#ready.shift() ?? (await this.#start());
    const turn = st.history.filter((m) => m.role === 'user').length;
    const text = await st.conv.userText(turn);
    const messages = [...st.history, { role: 'user' as const, content: text }];
    st.history = messages;
    return { conv: st.conv, turn, messages, key: `${st.conv.id}/m${turn}` };
  }

  async #start(): Promise<ConvState> {
    const conv = this.factory.conversation(this.#nextIndex++);
    const st: ConvState = { conv, history: await this.factory.preamble(conv) };
    this.#states.set(conv.id, st);
    return st;
  }

  /** The turn finished with this reply text (null when it failed: the conversation ends). */
  complete(t: Turn, reply: string | null): void {
    const st = this.#states.get(t.conv.id);
    if (!st) return;
    if (reply === null || t.turn + 1 >= t.conv.turns) {
      this.#states.delete(t.conv.id);
      return;
    }
    st.history = [...st.history, { role: 'assistant', content: reply }];
    this.#ready.push(st);
  }

  get conversationsStarted(): number {
    return this.#nextIndex;
  }
}
