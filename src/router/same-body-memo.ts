// Long bodies prepared before, per config: the very same long body again skips the worker and its JSON.parse.
import type { PrepareResult } from '../tokenize/off-thread/protocol.js';

/** Bodies this long or longer are remembered (the pool's long jobs: about 32k tokens and up). */
export const SAME_BODY_MIN_BYTES = 128 * 1024;
/** Bytes kept per config: the bodies' own bytes plus ~48 per block key (about 20 bodies of 100k tokens). */
export const SAME_BODY_MEMO_BYTES = 16 << 20;
/** Entries kept per config: a lookup compares the body with the same-length ones among them. */
export const SAME_BODY_MEMO_ENTRIES = 32;

type Prepared = PrepareResult & { ok: true };

/** Every memo alive in the process (weakly: a closed router's memo goes with it), for the state dump. */
const live = new Set<WeakRef<SameBodyMemo>>();

/** The process's same-body memos, summed: what the plugin's state dump shows under `routers`. */
export function sameBodyStats(): { memos: number; entries: number; bytes: number; hits: number } {
  const sum = { memos: 0, entries: 0, bytes: 0, hits: 0 };
  for (const ref of live) {
    const m = ref.deref();
    if (!m) {
      live.delete(ref);
      continue;
    }
    const s = m.stats();
    sum.memos++;
    sum.entries += s.entries;
    sum.bytes += s.bytes;
    sum.hits += s.hits;
  }
  return sum;
}

interface Entry {
  body: Uint8Array | string;
  /** The settings the result was prepared under (a change of context windows makes it a miss). */
  settings: object;
  result: Prepared;
  bytes: number;
}

const sameBytes = (a: Uint8Array | string, b: Uint8Array | string): boolean => {
  if (typeof a === 'string' || typeof b === 'string') return a === b;
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
};
const sizeOf = (b: Uint8Array | string): number => (typeof b === 'string' ? 2 * b.length : b.byteLength);

/**
 * A client that sends the same long context again (a retry, an agent re-sending after a tool error, n
 * samples as n requests) gets the block keys and facts it got before, without the hand-over to a worker, the
 * body's JSON.parse there and the whole-prompt memos' lookups: what is left is a byte comparison on the event
 * loop (memcmp; a new turn differs in length and costs no comparison at all) and the lookup. Compared, not
 * hashed: a digest would cost every long request a pass over its bytes to serve the few that repeat.
 *
 * Only results a body alone decides: `repeatable` (a template without a clock) and `ok` (a budget that ran
 * out depends on the moment). Most recent first; bounded by SAME_BODY_MEMO_BYTES and SAME_BODY_MEMO_ENTRIES.
 */
export class SameBodyMemo {
  #entries: Entry[] = [];
  #bytes = 0;
  #hits = 0;

  constructor(
    readonly maxBytes = SAME_BODY_MEMO_BYTES,
    readonly maxEntries = SAME_BODY_MEMO_ENTRIES,
  ) {
    live.add(new WeakRef(this));
  }

  /** The result prepared before for this very body under these settings, as a hit: nothing re-tokenized. */
  get(body: Uint8Array | string, settings: object): PrepareResult | undefined {
    const n = sizeOf(body);
    if (n < SAME_BODY_MIN_BYTES) return undefined;
    const t0 = performance.now();
    for (let i = 0; i < this.#entries.length; i++) {
      const e = this.#entries[i]!;
      if (e.settings !== settings || sizeOf(e.body) !== n || !sameBytes(e.body, body)) continue;
      if (i > 0) this.#entries.unshift(...this.#entries.splice(i, 1));
      this.#hits++;
      const r = e.result;
      const chars = r.promptChars.cached + r.promptChars.tokenized;
      return {
        ...r,
        promptChars: { cached: chars, tokenized: 0 },
        timings: { parseMs: performance.now() - t0, templateMs: 0, tokenizeMs: 0, keysMs: 0 },
      };
    }
    return undefined;
  }

  /** Remembers a worker's result for `body` (a copy of its bytes: the caller's may be reused). */
  set(body: Uint8Array | string, settings: object, result: PrepareResult | { ok: false }): void {
    if (!result.ok || result.repeatable !== true) return;
    const n = sizeOf(body);
    const bytes = n + 48 * result.keys.length + 256;
    if (n < SAME_BODY_MIN_BYTES || bytes > this.maxBytes) return;
    const own = typeof body === 'string' ? body : new Uint8Array(body);
    this.#entries.unshift({ body: own, settings, result, bytes });
    this.#bytes += bytes;
    while (this.#entries.length > this.maxEntries || this.#bytes > this.maxBytes)
      this.#bytes -= this.#entries.pop()!.bytes;
  }

  stats(): { entries: number; bytes: number; hits: number } {
    return { entries: this.#entries.length, bytes: this.#bytes, hits: this.#hits };
  }
}
