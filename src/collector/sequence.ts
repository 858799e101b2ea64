// Sequence-number rules for one vLLM publisher: next, gap, duplicate, out of order or a restarted process.
import { createHash } from 'node:crypto';

/**
 * Sequence rules for one vLLM publisher (ZmqEventPublisher, vllm/distributed/kv_events.py; docs/collector.md
 * "Sequence numbers"). Its `seq` comes from `itertools.count()`: 0 in each new process, +1 per published batch. Its replay
 * buffer is an in-memory `deque(maxlen=buffer_steps)` of the encoded batches: it starts empty with the
 * process, and a replay returns the very bytes that were published under each number.
 *
 * So, relative to the last batch applied:
 * - the next number is ingested; a jump forward means batches were lost (HWM, a disconnection): replay;
 * - a number at or below it is either the same process sending something again (a duplicate or a straggler)
 *   or a new process counting from 0 again (an engine restart). `classifyBehind` tells them apart.
 */
export type SeqPosition =
  | { kind: 'first' }
  | { kind: 'next' }
  | { kind: 'gap'; expected: number; missing: number }
  | { kind: 'behind' };

/** @param last the last ingested sequence, null if none since the pod was last cleared */
export function classifySeq(last: number | null, seq: number): SeqPosition {
  if (last === null) return { kind: 'first' };
  if (seq === last + 1) return { kind: 'next' };
  if (seq <= last) return { kind: 'behind' };
  return { kind: 'gap', expected: last + 1, missing: seq - last - 1 };
}

/** What is known about a batch whose number is at or below the last one applied. */
export interface BehindFacts {
  /**
   * The batch applied under the same number (AppliedWindow): the same bytes, other bytes, or not known (older
   * than the window, or never applied: a clear skipped it).
   */
  applied: 'same' | 'different' | 'unknown';
  /**
   * The replay buffer's answer about the last batch applied: still there under its number with the same
   * bytes (true: the same process), another batch there or nothing where it must be (false: a new process),
   * or no answer (null: not asked, timed out, or the buffer has moved past it).
   */
  sameProcess: boolean | null;
  /** A replay endpoint exists and has not been asked about this batch yet. */
  canAsk: boolean;
  /** The batch's publisher timestamp is later than the last applied batch's (null: not decodable). */
  newer: boolean | null;
}

export type BehindVerdict = 'duplicate' | 'out_of_order' | 'restart' | 'ask';

/**
 * - The same bytes under that number: a **duplicate** (the batch was already applied).
 * - Other bytes under a number the process already used: only a **new process** can do that (restart).
 *   But a forged or corrupted frame looks the same, and a restart costs the pod its index: when there is a
 *   replay buffer, it decides first. Still holding the last batch we applied, the process is the same and
 *   the batch is not its own (dropped as out of order); otherwise it is a restart (issue #36: a few hundred
 *   such frames made one collector clear and fully replay the pod for each).
 * - Otherwise the replay buffer decides when there is one: it holds the last batch we applied, so it is
 *   the same process and the batch is an **out-of-order** straggler; it does not, so it is a restart.
 * - Without an answer: a batch stamped later than the last one applied was published after it, under a
 *   lower number: a restart. An earlier one is out of order. (ZeroMQ itself neither reorders nor repeats
 *   messages on a connection: in practice only a restart sends a number backwards.)
 */
export function classifyBehind(f: BehindFacts): BehindVerdict {
  if (f.applied === 'same') return 'duplicate';
  if (f.applied === 'different') {
    if (f.sameProcess === true) return 'out_of_order';
    return f.canAsk ? 'ask' : 'restart';
  }
  if (f.sameProcess !== null) return f.sameProcess ? 'out_of_order' : 'restart';
  if (f.canAsk) return 'ask';
  return f.newer === true ? 'restart' : 'out_of_order';
}

/** A payload's fingerprint: equal bytes ⇔ equal digests (for our purposes). */
export function payloadDigest(payload: Uint8Array): string {
  return createHash('sha1').update(payload).digest('base64');
}

/**
 * Digests of the last `size` batches applied from one publisher process, by sequence number. It survives a
 * clear after a gap (the process is the same) and is reset when the process changes.
 */
export class AppliedWindow {
  readonly #seqs: number[];
  readonly #digests: (string | null)[];

  constructor(readonly size = 256) {
    this.#seqs = new Array<number>(size).fill(-1);
    this.#digests = new Array<string | null>(size).fill(null);
  }

  record(seq: number, digest: string): void {
    const i = seq % this.size;
    this.#seqs[i] = seq;
    this.#digests[i] = digest;
  }

  lookup(seq: number, digest: string): BehindFacts['applied'] {
    const i = seq % this.size;
    if (this.#seqs[i] !== seq) return 'unknown';
    return this.#digests[i] === digest ? 'same' : 'different';
  }

  reset(): void {
    this.#seqs.fill(-1);
    this.#digests.fill(null);
  }

  /** The remembered [seq, digest] pairs, oldest first. */
  entries(): [number, string][] {
    const out: [number, string][] = [];
    for (let i = 0; i < this.size; i++) {
      const d = this.#digests[i];
      if (d !== null && d !== undefined) out.push([this.#seqs[i]!, d]);
    }
    return out.sort((a, b) => a[0] - b[0]);
  }

  restore(entries: readonly (readonly [number, string])[]): void {
    this.reset();
    for (const [seq, digest] of entries) this.record(seq, digest);
  }
}
