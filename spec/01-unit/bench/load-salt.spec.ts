import { beforeAll, describe, expect, it } from 'vitest';
import { randomSalt } from '../../../bench/lib/load/options.js';
import { loadModelSetup, type ModelSetup } from '../../../bench/lib/setup.js';
import { PUBLISHED_SHAPES, WorkloadFactory } from '../../../bench/lib/workload/workloads.js';
import type { WorkloadName } from '../../../bench/lib/types.js';

const BLOCK = 16;

// bench:load salts every prompt so no run hits another's cache. That holds only if the salt and the prompt's
// own tag both fall inside the first KV block: vLLM chains block hashes from the first, so a shared first
// block is a cache hit however unique the rest is.
describe('bench:load prompt salts, as vLLM tokenizes them (Qwen3, ChatML)', () => {
  let m: ModelSetup;
  beforeAll(async () => {
    m = await loadModelSetup();
  });

  /** The first block of conversation `index`'s first prompt, as the server would tokenize it. */
  async function firstBlock(
    w: WorkloadName,
    salt: string,
    trial: number,
    index: number,
  ): Promise<{ block: string; prefix: number | null }> {
    const f = new WorkloadFactory(w, PUBLISHED_SHAPES, m.synth, 42, trial, salt);
    const conv = f.conversation(index);
    const messages = [
      ...(await f.preamble(conv)),
      { role: 'user' as const, content: await conv.userText(0) },
    ];
    const text = m.template.render({
      model: m.model,
      messages,
      addGenerationPrompt: true,
      continueFinalMessage: false,
      stream: true,
    });
    const { tokens } = await m.promptTokenizer.tokenize(text, 1 << 22);
    return { block: tokens.slice(0, BLOCK).join(','), prefix: conv.prefixIndex };
  }

  it.each(['control', 'shared-prefix'] as const)(
    '%s: no two of (salt, conversation) share a first block, up to conversation 99,999 (a salt per run)',
    async (w) => {
      // Random ones, near neighbours, and the longest and least mergeable a user may give (--salt).
      const salts = [randomSalt(), randomSalt(), 'zzzzzz', 'zzzzzy', 'QXZJKV', 'qxzjkv'];
      const seen = new Map<string, string>();
      for (const salt of salts)
        for (const trial of [0, 3])
          for (const index of [0, 1, 10, 9_999, 99_999]) {
            const { block, prefix } = await firstBlock(w, salt, trial, index);
            // Shared-prefix: the system prompt is prefix p's, shared on purpose by its conversations.
            // The trial is not in a salted tag: every run draws its own salt.
            const who = prefix !== null ? `${salt}/p${prefix}` : `${salt}/${index}`;
            const other = seen.get(block);
            if (other !== undefined && other !== who)
              expect.fail(`${who} and ${other} share their first block`);
            seen.set(block, who);
          }
    },
    60_000,
  );
});
