import { describe, expect, it } from 'vitest';
import type {
  BlockStoredEvent,
  EngineOutcome,
  KvCacheEvent,
  StepOutcome,
} from '../../../emulator/engine/types.js';
import { drain, prompt, toyEngine } from './engine-harness.js';

const steps = (os: EngineOutcome[]): StepOutcome[] => os.filter((o): o is StepOutcome => o.kind === 'step');
const events = (os: EngineOutcome[]): KvCacheEvent[] => os.flatMap((o) => o.kvEvents);
const stored = (os: EngineOutcome[]): BlockStoredEvent[] =>
  events(os).filter((e): e is BlockStoredEvent => e.type === 'BlockStored');
const admittedOf = (os: EngineOutcome[], id: string) =>
  steps(os)
    .flatMap((s) => s.admitted)
    .find((a) => a.requestId === id);
const finishedOf = (os: EngineOutcome[], id: string) =>
  os.flatMap((o) => o.finished).find((f) => f.requestId === id);

describe('engine scheduler and prefix cache (vLLM V1 behaviours)', () => {
  it('recomputes the last prompt token: an exact block-aligned repeat loses its last block, stored again', () => {
    const e = toyEngine();
    const p = prompt(16, 1);
    e.addRequest({ id: 'a', promptTokenIds: p, maxTokens: 1 }, 0);
    const first = drain(e);
    const aHashes = stored(first).flatMap((s) => s.blockHashes);
    expect(aHashes).toHaveLength(4);
    expect(stored(first)[0]?.parentBlockHash).toBeNull();

    e.addRequest({ id: 'b', promptTokenIds: p, maxTokens: 1 }, e.clockMs + 100);
    const second = drain(e);
    expect(admittedOf(second, 'b')?.cachedTokens).toBe(12);
    expect(steps(second)[0]?.scheduled).toEqual([{ requestId: 'b', numTokens: 4, contextTokens: 12 }]);
    const again = stored(second);
    expect(again).toHaveLength(1);
    expect(again[0]?.blockHashes).toEqual([aHashes[3]]);
    expect(again[0]?.parentBlockHash).toBe(aHashes[2]);
    expect(again[0]?.tokenIds).toEqual(p.slice(12, 16));
    // Two physical blocks now hold that hash.
    expect(e.snapshot().cachedHashes.get(aHashes[3]!)).toBe(2);
    expect(finishedOf(second, 'b')?.cachedTokens).toBe(12);
  });

  it('caches full blocks of output, so the next turn of a conversation hits them', () => {
    const e = toyEngine();
    const p = prompt(10, 2);
    e.addRequest({ id: 'turn1', promptTokenIds: p, maxTokens: 9, ignoreEos: true }, 0);
    const os = drain(e);
    const out = steps(os).flatMap((s) => s.tokens.flatMap((t) => t.tokenIds));
    expect(out).toHaveLength(9);
    // Computed tokens are prompt + 8 outputs (the last sampled token never runs): 4 full blocks of 4.
    const st = stored(os);
    expect(st.flatMap((s) => s.tokenIds)).toEqual([...p, ...out].slice(0, 16));
    expect(st.at(-1)?.tokenIds.some((t) => out.includes(t))).toBe(true);

    const next = [...p, ...out, 7, 8, 9];
    e.addRequest({ id: 'turn2', promptTokenIds: next, maxTokens: 1 }, e.clockMs + 1);
    expect(admittedOf(drain(e), 'turn2')?.cachedTokens).toBe(16);
  });

  it('frees in reverse order and evicts the LRU head only on reuse (BlockRemoved then)', () => {
    // 5 GPU blocks = null block + 4 usable.
    const e = toyEngine({ kvCapacityTokens: 20 });
    const a = prompt(15, 3);
    e.addRequest({ id: 'a', promptTokenIds: a, maxTokens: 1 }, 0);
    const os = drain(e);
    const aHashes = stored(os).flatMap((s) => s.blockHashes);
    expect(aHashes).toHaveLength(3);
    expect(events(os).some((x) => x.type === 'BlockRemoved')).toBe(false);
    expect(e.snapshot().numFreeBlocks).toBe(4);

    // Needs 2 blocks: the unhashed tail block (reused first, no event) and a's last cached block.
    e.addRequest({ id: 'b', promptTokenIds: prompt(5, 4), maxTokens: 1 }, e.clockMs + 1);
    const os2 = drain(e);
    const removed = events(os2).filter((x) => x.type === 'BlockRemoved');
    expect(removed).toEqual([{ type: 'BlockRemoved', blockHashes: [aHashes[2]] }]);

    e.addRequest({ id: 'c', promptTokenIds: a, maxTokens: 1 }, e.clockMs + 1);
    expect(admittedOf(drain(e), 'c')?.cachedTokens).toBe(8);
  });

  it('preempts the newest running request when blocks run out, back to the front of the queue', () => {
    // 7 GPU blocks = 6 usable; a and b grow to 5 blocks each, so they cannot both run. c waits on max_num_seqs.
    const e = toyEngine({ kvCapacityTokens: 28, maxNumBatchedTokens: 64, maxNumSeqs: 2 });
    e.addRequest({ id: 'a', promptTokenIds: prompt(8, 5), maxTokens: 12, ignoreEos: true }, 0);
    e.addRequest({ id: 'b', promptTokenIds: prompt(8, 6), maxTokens: 12, ignoreEos: true }, 0);
    e.addRequest({ id: 'c', promptTokenIds: prompt(2, 7), maxTokens: 1 }, 0);
    const os = steps(drain(e));
    const preIdx = os.findIndex((s) => s.preempted.length > 0);
    const pre = os[preIdx];
    expect(pre?.preempted).toEqual(['b']);
    expect(pre?.admitted).toEqual([]);
    expect(pre?.scheduled.map((s) => s.requestId)).toEqual(['a']);
    expect(finishedOf(os, 'b')?.numPreemptions).toBe(1);
    expect(finishedOf(os, 'b')?.outputTokens).toBe(12);
    expect(finishedOf(os, 'a')?.numPreemptions).toBe(0);
    // b went back to the FRONT of the waiting queue: it is rescheduled no later than c is first scheduled.
    const after = os.slice(preIdx + 1).flatMap((s) => s.scheduled.map((w) => w.requestId));
    expect(after.indexOf('b')).toBeGreaterThanOrEqual(0);
    expect(after.indexOf('c')).toBeGreaterThan(after.indexOf('b'));
    expect(os.slice(0, preIdx + 1).some((s) => s.scheduled.some((w) => w.requestId === 'c'))).toBe(false);
  });

  it('admits a waiting request only when its whole prompt fits (scheduler_reserve_full_isl)', () => {
    // 11 GPU blocks = 10 usable. a takes 6 blocks for its prompt and grows to 7; b's prompt needs 6 more.
    const run = (reserveFullIsl?: boolean) => {
      const e = toyEngine({
        kvCapacityTokens: 44,
        maxNumBatchedTokens: 16,
        ...(reserveFullIsl === undefined ? {} : { reserveFullIsl }),
      });
      e.addRequest({ id: 'a', promptTokenIds: prompt(24, 50), maxTokens: 4, ignoreEos: true }, 0);
      e.addRequest({ id: 'b', promptTokenIds: prompt(24, 51), maxTokens: 1 }, 0);
      const os = steps(drain(e));
      const stepOf = (pred: (s: StepOutcome) => boolean) => os.findIndex(pred);
      return {
        bAdmitted: stepOf((s) => s.admitted.some((a) => a.requestId === 'b')),
        aDone: stepOf((s) => s.finished.some((f) => f.requestId === 'a')),
        preemptions: os.flatMap((s) => s.preempted),
      };
    };
    // Default (vLLM ≥ the full-ISL change): b waits for a to finish instead of prefilling a chunk first.
    const full = run();
    expect(full.preemptions).toEqual([]);
    expect(full.bAdmitted).toBe(full.aDone + 1);
    // The older first-chunk check admits b beside a, then preempts it when a's decode needs a block.
    const chunk = run(false);
    expect(chunk.bAdmitted).toBe(1);
    expect(chunk.preemptions).toContain('b');
  });

  it('counts prefix-hit blocks as already there in the full-sequence admission check', () => {
    // 10 usable blocks; a holds 6. b shares a's first 5 blocks, so it needs only 1 new block to fit.
    const e = toyEngine({ kvCapacityTokens: 44, maxNumBatchedTokens: 64 });
    const p = prompt(24, 52);
    e.addRequest({ id: 'a', promptTokenIds: p, maxTokens: 8, ignoreEos: true }, 0);
    e.advanceTo(1);
    e.addRequest({ id: 'b', promptTokenIds: [...p.slice(0, 20), 9, 9, 9, 9], maxTokens: 1 }, 1);
    const os = drain(e);
    const b = admittedOf(os, 'b');
    expect(b?.cachedTokens).toBe(20);
    const bStep = steps(os).findIndex((s) => s.admitted.some((x) => x.requestId === 'b'));
    const aDone = steps(os).findIndex((s) => s.finished.some((f) => f.requestId === 'a'));
    expect(bStep).toBeLessThan(aDone);
  });

  it('blocks the head of the line: a small request behind a big one waits', () => {
    // 9 GPU blocks = 8 usable.
    const e = toyEngine({ kvCapacityTokens: 36, maxNumBatchedTokens: 64 });
    e.addRequest({ id: 'a', promptTokenIds: prompt(20, 8), maxTokens: 8, ignoreEos: true }, 0);
    e.advanceTo(1);
    e.addRequest({ id: 'big', promptTokenIds: prompt(16, 9), maxTokens: 1 }, 1);
    e.addRequest({ id: 'small', promptTokenIds: prompt(2, 10), maxTokens: 1 }, 1);
    const os = drain(e);
    const stepOf = (id: string) => steps(os).findIndex((s) => s.admitted.some((a) => a.requestId === id));
    expect(stepOf('big')).toBeGreaterThan(0);
    expect(stepOf('small')).toBe(stepOf('big'));
    const aDone = steps(os).findIndex((s) => s.finished.some((f) => f.requestId === 'a'));
    expect(stepOf('big')).toBe(aDone + 1);
  });

  it('splits a long prompt into chunks within the token budget, decodes going first', () => {
    const e = toyEngine({ maxNumBatchedTokens: 16 });
    e.addRequest({ id: 'd', promptTokenIds: prompt(4, 11), maxTokens: 10, ignoreEos: true }, 0);
    const first = e.advanceTo(e.nextEventTimeMs() as number);
    expect(first).toEqual([]);
    e.addRequest({ id: 'long', promptTokenIds: prompt(40, 12), maxTokens: 1 }, 0.5);
    const os = drain(e);
    const withLong = steps(os).filter((s) => s.scheduled.some((w) => w.requestId === 'long'));
    expect(withLong.map((s) => s.scheduled)).toEqual([
      [
        { requestId: 'd', numTokens: 1, contextTokens: 4 },
        { requestId: 'long', numTokens: 15, contextTokens: 0 },
      ],
      [
        { requestId: 'd', numTokens: 1, contextTokens: 5 },
        { requestId: 'long', numTokens: 15, contextTokens: 15 },
      ],
      [
        { requestId: 'd', numTokens: 1, contextTokens: 6 },
        { requestId: 'long', numTokens: 10, contextTokens: 30 },
      ],
    ]);
    // Partial chunks sample nothing; the first token comes with the last chunk.
    expect(withLong.map((s) => s.tokens.some((t) => t.requestId === 'long'))).toEqual([false, false, true]);
    expect(withLong[2]?.numPrefillTokens).toBe(10);
  });

  it('with long_prefill_token_threshold, a long prefill takes at most that many tokens a step, running or waiting, and a short request is not held behind it', () => {
    const run = (threshold: number): StepOutcome[] => {
      const e = toyEngine({ maxNumBatchedTokens: 16, longPrefillTokenThreshold: threshold });
      e.addRequest({ id: 'long', promptTokenIds: prompt(40, 21), maxTokens: 1 }, 0);
      e.addRequest({ id: 'short', promptTokenIds: prompt(6, 22), maxTokens: 1 }, 0);
      return steps(drain(e));
    };
    const firstOf = (ss: StepOutcome[], id: string): number =>
      ss.findIndex((s) => s.scheduled.some((w) => w.requestId === id));
    // vLLM's default (0): the long prompt takes the whole budget until its last chunk.
    const none = run(0);
    expect(none[0]!.scheduled).toEqual([{ requestId: 'long', numTokens: 16, contextTokens: 0 }]);
    expect(firstOf(none, 'short')).toBe(2);
    // Capped at 10: the waiting short prompt gets the rest of the first step's budget.
    const capped = run(10);
    expect(capped[0]!.scheduled).toEqual([
      { requestId: 'long', numTokens: 10, contextTokens: 0 },
      { requestId: 'short', numTokens: 6, contextTokens: 0 },
    ]);
    expect(capped[1]!.scheduled[0]).toEqual({ requestId: 'long', numTokens: 10, contextTokens: 10 });
    expect(() => toyEngine({ longPrefillTokenThreshold: -1 })).toThrow(RangeError);
  });

  it('lets a request hit blocks another request allocated earlier in the same step', () => {
    const e = toyEngine({ maxNumBatchedTokens: 64 });
    const p = prompt(20, 13);
    e.addRequest({ id: 'x', promptTokenIds: p, maxTokens: 1 }, 0);
    e.addRequest({ id: 'y', promptTokenIds: p, maxTokens: 1 }, 0);
    const s = steps(drain(e))[0] as StepOutcome;
    expect(s.admitted.map((a) => [a.requestId, a.cachedTokens, a.eventIndex])).toEqual([
      ['x', 0, 0],
      ['y', 16, 1],
    ]);
  });

  it('respects max_num_seqs', () => {
    const e = toyEngine({ maxNumSeqs: 2, maxNumBatchedTokens: 64 });
    for (let i = 0; i < 5; i++)
      e.addRequest({ id: `r${i}`, promptTokenIds: prompt(6, 20 + i), maxTokens: 4, ignoreEos: true }, 0);
    const os = drain(e);
    expect(Math.max(...steps(os).map((s) => s.scheduled.length))).toBe(2);
    expect(os.flatMap((o) => o.finished)).toHaveLength(5);
  });

  it('resets the prefix cache only when idle; AllBlocksCleared goes out first in the next step, as in vLLM', () => {
    const e = toyEngine();
    const p = prompt(12, 30);
    e.addRequest({ id: 'a', promptTokenIds: p, maxTokens: 3, ignoreEos: true }, 0);
    e.advanceTo(0);
    expect(e.resetPrefixCache(0.1)).toBe(false);
    drain(e);
    expect(e.resetPrefixCache(e.clockMs)).toBe(true);
    // BlockPool.reset_prefix_cache only queues the event: nothing comes out while the engine is idle.
    expect(e.advanceTo(e.clockMs + 50)).toEqual([]);
    expect(e.nextEventTimeMs()).toBeNull();
    expect(e.snapshot().cachedHashes.size).toBe(0);
    e.addRequest({ id: 'b', promptTokenIds: p, maxTokens: 1 }, e.clockMs + 1);
    const os = drain(e);
    expect(admittedOf(os, 'b')).toMatchObject({ cachedTokens: 0, eventIndex: 1 });
    const [first, ...rest] = steps(os);
    expect(first?.kvEvents.map((x) => x.type)).toEqual(['AllBlocksCleared', 'BlockStored']);
    expect(rest.flatMap((s) => s.kvEvents).some((x) => x.type === 'AllBlocksCleared')).toBe(false);
  });

  it('counts no prefix-cache query for a request that skips the lookup (prompt_logprobs)', () => {
    const e = toyEngine();
    e.addRequest({ id: 'skip', promptTokenIds: prompt(12, 31), maxTokens: 1, skipPrefixCache: true }, 0);
    e.addRequest({ id: 'look', promptTokenIds: prompt(12, 32), maxTokens: 1 }, 0);
    const os = drain(e);
    expect(admittedOf(os, 'skip')).toMatchObject({ cachedTokens: 0, queriedTokens: 0 });
    expect(admittedOf(os, 'look')).toMatchObject({ cachedTokens: 0, queriedTokens: 12 });
  });

  it('aborts waiting requests at once and running ones at the end of their step', () => {
    const e = toyEngine({ maxNumSeqs: 1 });
    e.addRequest({ id: 'run', promptTokenIds: prompt(8, 40), maxTokens: 50, ignoreEos: true }, 0);
    e.addRequest({ id: 'wait', promptTokenIds: prompt(8, 41), maxTokens: 5 }, 0);
    e.advanceTo(0);
    expect(e.abortRequest('wait', 0.5)).toBe(true);
    expect(e.abortRequest('run', 0.5)).toBe(true);
    const os = drain(e);
    expect(os[0]).toMatchObject({
      kind: 'abort',
      finished: [{ requestId: 'wait', reason: 'abort', firstScheduledMs: null }],
    });
    expect(os[1]).toMatchObject({
      kind: 'step',
      tokens: [],
      finished: [{ requestId: 'run', reason: 'abort' }],
    });
    expect(e.snapshot().numUsedBlocks).toBe(0);
    expect(e.abortRequest('run', e.clockMs)).toBe(false);
  });

  it('samples EOS with the configured mean unless ignore_eos, honouring min_tokens', () => {
    const e = toyEngine({
      meanOutputTokens: 20,
      maxNumSeqs: 64,
      maxNumBatchedTokens: 512,
      kvCapacityTokens: 4 * 2048,
    });
    for (let i = 0; i < 300; i++)
      e.addRequest({ id: `q${i}`, promptTokenIds: prompt(3, i), maxTokens: 2000, minTokens: 3 }, 0);
    const fin = drain(e).flatMap((o) => o.finished);
    expect(fin).toHaveLength(300);
    const mean = fin.reduce((s, f) => s + f.outputTokens, 0) / fin.length;
    expect(mean).toBeGreaterThan(14);
    expect(mean).toBeLessThan(30);
    expect(fin.every((f) => f.reason === 'stop' && f.stopTokenId === 0 && f.outputTokens >= 3)).toBe(true);
  });

  it('rejects what vLLM rejects, as values', () => {
    const e = toyEngine({ kvCapacityTokens: 4 * 11 });
    expect(e.maxModelLen).toBe(40);
    // vLLM's renderer and InputProcessor wording (v0.26.1rc1).
    expect(e.addRequest({ id: 'x', promptTokenIds: prompt(36, 1), maxTokens: 6 }, 0)).toEqual({
      ok: false,
      reason: 'context_too_long',
      message:
        "This model's maximum context length is 40 tokens. However, you requested 6 output tokens and your " +
        'prompt contains 36 input tokens, for a total of 42 tokens. Please reduce the length of the input ' +
        'prompt or the number of requested output tokens.',
    });
    // One past the limit is what vLLM's truncated tokenization reports, so it says "at least" for it.
    expect(e.addRequest({ id: 'x', promptTokenIds: prompt(35, 1), maxTokens: 6 }, 0)).toMatchObject({
      reason: 'context_too_long',
      message: expect.stringContaining(
        'prompt contains at least 35 input tokens, for a total of at least 41 tokens.',
      ),
    });
    expect(e.addRequest({ id: 'x', promptTokenIds: [], maxTokens: 6 }, 0)).toEqual({
      ok: false,
      reason: 'empty_prompt',
      message: 'The decoder prompt cannot be empty',
    });
    expect(e.addRequest({ id: 'x', promptTokenIds: prompt(5, 1), maxTokens: 6 }, 0)).toEqual({ ok: true });
    expect(e.addRequest({ id: 'x', promptTokenIds: prompt(5, 1), maxTokens: 6 }, 0)).toMatchObject({
      reason: 'duplicate_id',
    });
    expect(() => e.advanceTo(-1)).toThrow(RangeError);
  });
});
