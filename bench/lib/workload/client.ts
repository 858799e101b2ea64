// ConversationClient: GuideLLM's client-side multi-turn logic (a turn waits for the previous reply).
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
  /** The worker that started the conversation; only it sends the follow-ups (GuideLLM's turns_queue). */
  owner: number;
}

/**
 * GuideLLM's client-side conversation logic (bench.md §1.6): a follow-up turn becomes ready only when the
 * previous turn finished, with the full history including the assistant's actual reply; whoever needs a
 * request next takes a ready follow-up before starting a new conversation. Poisson arrivals call next()
 * per arrival slot with the slot's worker (GuideLLM keeps the conversations a worker process started in that
 * worker); a concurrent stream calls next() when its previous request finished.
 */
export class ConversationClient {
  #nextIndex = 0;
  readonly #ready: ConvState[] = [];
  readonly #states = new Map<string, ConvState>();

  constructor(readonly factory: WorkloadFactory) {}

  async next(owner = 0): Promise<Turn> {
    const i = this.#ready.findIndex((r) => r.owner === owner);
    const st = i >= 0 ? this.#ready.splice(i, 1)[0]! : await this.#start(owner);
    const turn = st.history.filter((m) => m.role === 'user').length;
    const text = await st.conv.userText(turn);
    const messages = [...st.history, { role: 'user' as const, content: text }];
    st.history = messages;
    return { conv: st.conv, turn, messages, key: `${st.conv.id}/m${turn}` };
  }

  async #start(owner: number): Promise<ConvState> {
    const conv = this.factory.conversation(this.#nextIndex++);
    const st: ConvState = { conv, history: await this.factory.preamble(conv), owner };
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
