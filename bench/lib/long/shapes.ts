// Long-context shapes (issue #30): coding-agent conversations of 100k/240k tokens and pods holding prefixes.
import type { BlockKey } from '../../../src/core/types.js';
import type { KvIndex } from '../../../src/index/index.js';
import { blockKeys, keySeed } from '../../../src/core/block-keys.js';
import { Rng } from '../rng.js';
import type { TextSynth } from '../workload/synth.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** A long conversation: a shared system prompt (the codebase), then turns, about `tokens` tokens in all. */
export interface LongContext {
  label: string;
  tokens: number;
  messages: ChatMessage[];
  /** Message count of the shared system prompt part (always 1: the system message). */
  systemTokens: number;
}

/** The system prompt's share: an agent's instructions plus the files it was given. */
const SYSTEM_SHARE = 0.3;
/** Tokens of one user turn and of one assistant turn (tool output and edits run long in agents). */
const USER_TURN = 600;
const ASSISTANT_TURN = 2400;

/**
 * A conversation of about `tokens` tokens, GuideLLM-style token-exact text from the bench's synthesizer
 * (4,096 single-token words, a unique tag per message so no two contexts share a block by chance).
 */
export async function longContext(
  synth: TextSynth,
  tag: string,
  tokens: number,
  seed: number,
): Promise<LongContext> {
  const rng = new Rng(seed);
  const systemTokens = Math.round(tokens * SYSTEM_SHARE);
  const messages: ChatMessage[] = [
    { role: 'system', content: await synth.text(`${tag} s`, systemTokens, rng) },
  ];
  let used = systemTokens;
  for (let t = 0; used < tokens; t++) {
    const u = Math.min(USER_TURN, tokens - used);
    messages.push({ role: 'user', content: await synth.text(`${tag} u${t}`, Math.max(8, u), rng) });
    used += u;
    if (used >= tokens) break;
    const a = Math.min(ASSISTANT_TURN, tokens - used);
    messages.push({ role: 'assistant', content: await synth.text(`${tag} a${t}`, Math.max(8, a), rng) });
    used += a;
  }
  // End on a user message: the request asks for the next assistant turn.
  if (messages[messages.length - 1]!.role !== 'user')
    messages.push({ role: 'user', content: await synth.text(`${tag} ulast`, 64, rng) });
  return { label: tag, tokens, messages, systemTokens };
}

/** The context plus a new turn: the assistant's last answer (never seen by the router) and a new question. */
export async function newTurn(
  synth: TextSynth,
  ctx: LongContext,
  i: number,
  rng: Rng,
): Promise<ChatMessage[]> {
  return [
    ...ctx.messages,
    { role: 'assistant', content: await synth.text(`${ctx.label} na${i}`, 300, rng) },
    { role: 'user', content: await synth.text(`${ctx.label} nu${i}`, 200, rng) },
  ];
}

export function chatBody(model: string, messages: ChatMessage[]): string {
  return JSON.stringify({ model, stream: true, messages });
}

export interface Holdings {
  pods: number;
  /** (block, pod) entries written. */
  entries: number;
  /** Blocks of the context held by the pod holding the longest prefix. */
  longestPrefixBlocks: number;
}

/**
 * Pods holding various prefixes of the context, as a fleet serving one codebase to many agents does: a
 * quarter hold the system prompt only, a quarter a random prefix of the conversation, two pods the whole
 * context but its last turn, the rest none of it; every pod also holds `fillerBlocks` blocks of other
 * conversations (their keys are random, so they only cost memory and never match).
 */
export async function seedHoldings(
  index: KvIndex,
  model: string,
  pods: number,
  contextKeys: readonly BlockKey[],
  systemBlocks: number,
  fillerBlocks: number,
  seed: number,
): Promise<Holdings> {
  const rng = new Rng(seed);
  const now = Date.now();
  let entries = 0;
  let longest = 0;
  const almostAll = Math.max(0, contextKeys.length - Math.ceil((USER_TURN + ASSISTANT_TURN) / 16));
  for (let p = 0; p < pods; p++) {
    const pod = { model, podId: `pod-${String(p).padStart(3, '0')}` };
    await index.upsertPodState(pod, {
      address: `10.1.${p >> 8}.${(p & 255) + 1}:8000`,
      healthy: true,
      lastEventAtMs: now,
      lastScrapeAtMs: now,
      running: p % 5,
      waiting: p % 3,
    });
    let held = 0;
    if (p === 3 || p === 7) held = almostAll;
    else if (p % 4 === 0) held = systemBlocks;
    else if (p % 4 === 1) held = systemBlocks + rng.int(Math.max(1, contextKeys.length - systemBlocks));
    const ops: { op: 'store'; keys: BlockKey[]; tier: 'GPU' }[] = [];
    if (held > 0) ops.push({ op: 'store', keys: contextKeys.slice(0, held), tier: 'GPU' });
    if (fillerBlocks > 0) {
      const toks = Array.from({ length: fillerBlocks * 16 }, () => rng.int(150_000));
      ops.push({
        op: 'store',
        keys: blockKeys(toks, 16, keySeed({ model: `${model}-filler-${p}` })),
        tier: 'GPU',
      });
    }
    if (ops.length > 0) await index.apply(pod, ops);
    entries += held + fillerBlocks;
    longest = Math.max(longest, held);
  }
  return { pods, entries, longestPrefixBlocks: longest };
}
