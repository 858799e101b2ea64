// The frame fuzz's generator: prompt chains, valid vLLM KV-event batches, and the mutations sent beside them.
import type { Rng } from '../rng.js';
import { arrayHeader, encode, F64, Raw, type Value } from './msgpack-writer.js';

export const BS = 16;

/**
 * A prompt chain: its block hashes as the engine holds them (the first `hashes.length` blocks cached), and its
 * tokens, which may run past them over blocks evicted since (which the index must not credit).
 */
export interface Chain {
  tokens: number[];
  hashes: bigint[];
}

/**
 * The engine side of the fuzz: valid vLLM KvEventBatch payloads (array_like, 7 BlockStored fields, as vLLM
 * ≤ 0.23 sends them) over chains it models, and mutated frames. Valid chains use hashes from 2^63 and tokens
 * from 1; forged and mutated events use their own ranges (hashes from 2^40, tokens from 50,000,000), so that
 * whatever of them the collector accepts can never touch a valid chain, and the index's valid part can be
 * compared with the model.
 */
export class FrameSource {
  readonly chains: Chain[] = [];
  #hash = 2n ** 63n + 1n;
  #token = 1;
  #junkHash = 2n ** 40n;
  #junkToken = 50_000_000;

  constructor(readonly rng: Rng) {}

  #tokens(blocks: number, junk = false): number[] {
    const n = blocks * BS;
    const start = junk ? this.#junkToken : this.#token;
    if (junk) this.#junkToken += n;
    else this.#token += n;
    return Array.from({ length: n }, (_, i) => start + i);
  }

  #hashes(n: number, junk = false): bigint[] {
    return Array.from({ length: n }, () => (junk ? this.#junkHash++ : this.#hash++));
  }

  static stored(hashes: Value[], parent: Value, tokens: Value[], blockSize: Value = BS): Value[] {
    return ['BlockStored', hashes, parent, tokens, blockSize, null, 'GPU', null];
  }

  static batch(events: Value[], ts: Value = new F64(Date.now() / 1000), rank: Value = 0): Value[] {
    return [ts, events, rank];
  }

  /** One valid batch: a new chain, a chain extended, or a chain's last block evicted; the model follows. */
  validBatch(): Buffer {
    const r = this.rng.next();
    const held = this.chains.filter((c) => c.hashes.length > 0);
    if (r < 0.5 || held.length === 0) {
      const n = 1 + this.rng.int(4);
      const c: Chain = { tokens: this.#tokens(n), hashes: this.#hashes(n) };
      this.chains.push(c);
      return encode(FrameSource.batch([FrameSource.stored(c.hashes, null, c.tokens)]));
    }
    const c = this.rng.pick(held);
    if (r < 0.8) {
      const n = 1 + this.rng.int(2);
      const t = this.#tokens(n);
      const h = this.#hashes(n);
      const parent = c.hashes[c.hashes.length - 1]!;
      c.tokens.length = c.hashes.length * BS; // blocks evicted before are replaced by these
      c.tokens.push(...t);
      c.hashes.push(...h);
      return encode(FrameSource.batch([FrameSource.stored(h, parent, t)]));
    }
    // Evicted: its tokens stay in the chain, so the check sees that the index no longer holds it.
    const last = c.hashes.pop()!;
    return encode(FrameSource.batch([['BlockRemoved', [last], 'GPU']]));
  }

  /** A well-formed batch of forged events (junk ranges): what a restart-looking or jumping frame carries. */
  junkBatch(ts: Value = new F64(Date.now() / 1000)): Buffer {
    return encode(FrameSource.batch(this.#junkEvents(1 + this.rng.int(2)), ts));
  }

  #junkEvents(n: number): Value[][] {
    return Array.from({ length: n }, () => {
      const blocks = 1 + this.rng.int(3);
      return FrameSource.stored(this.#hashes(blocks, true), null, this.#tokens(blocks, true));
    });
  }

  /** A payload mutation: a batch the engine itself publishes (numbered, in its replay buffer). */
  mutatedPayload(kind: PayloadMutation): Buffer {
    const rng = this.rng;
    switch (kind) {
      case 'extreme_ts':
        return this.junkBatch(rng.pick(EXTREME_TS));
      case 'extreme_number': {
        const ev = this.#junkEvents(1)[0]!;
        const at = rng.pick([1, 2, 4, 5, 'token', 'hash', 'rank'] as const);
        const x = rng.pick(EXTREME_NUMBERS);
        if (at === 'token') (ev[3] as Value[])[rng.int((ev[3] as Value[]).length)] = x;
        else if (at === 'hash') (ev[1] as Value[])[0] = x;
        else if (at === 'rank') return encode(FrameSource.batch([ev], new F64(Date.now() / 1000), x));
        else ev[at] = x;
        return encode(FrameSource.batch([ev]));
      }
      case 'type_confusion': {
        const ev = this.#junkEvents(1)[0]!;
        const wrong = rng.pick(WRONG_TYPES);
        const at = rng.int(10);
        if (at < 7) ev[at] = wrong;
        else if (at === 7) return encode(FrameSource.batch([ev], wrong));
        else if (at === 8) return encode([new F64(Date.now() / 1000), wrong, 0]);
        else return encode(wrong);
        return encode(FrameSource.batch([ev]));
      }
      case 'truncated': {
        const b = this.junkBatch();
        return b.subarray(0, rng.int(b.length));
      }
      case 'wrong_length': {
        // The events array claims more (or fewer) events than follow.
        const evs = this.#junkEvents(2);
        const claim = rng.pick([0, 1, 3, 17, 65_535, 2 ** 31, 2 ** 32 - 1]);
        const body = Buffer.concat(evs.map((e) => encode(e)));
        return encode([
          new F64(Date.now() / 1000),
          new Raw(Buffer.concat([arrayHeader(claim).bytes, body])),
          0,
        ]);
      }
      case 'garbage': {
        const n = 1 + rng.int(64);
        return Buffer.from(Array.from({ length: n }, () => rng.int(256)));
      }
      case 'huge_array': {
        const which = rng.int(3);
        if (which === 0) {
          // 50,000 removals of blocks nobody holds.
          const h = this.#hashes(50_000, true);
          return encode(FrameSource.batch([['BlockRemoved', h, 'GPU']]));
        }
        if (which === 1) {
          // A token list far longer than its blocks.
          const ev = FrameSource.stored(this.#hashes(1, true), null, this.#tokens(4096, true));
          return encode(FrameSource.batch([ev]));
        }
        // 20,000 events of a type nobody knows.
        return encode(FrameSource.batch(Array.from({ length: 20_000 }, () => ['NotAnEvent', 1, 2])));
      }
    }
  }
}

export const PAYLOAD_MUTATIONS = [
  'extreme_ts',
  'extreme_number',
  'type_confusion',
  'truncated',
  'wrong_length',
  'garbage',
  'huge_array',
] as const;
export type PayloadMutation = (typeof PAYLOAD_MUTATIONS)[number];

/** Forged frames: sent on the PUB socket without the engine's numbering or its replay buffer. */
export const FRAME_MUTATIONS = ['frame_count', 'seq_frame', 'seq_jump', 'restart_look'] as const;
export type FrameMutation = (typeof FRAME_MUTATIONS)[number];

export const EXTREME_TS: Value[] = [
  new F64(-1e306),
  new F64(1e308),
  new F64(-1e308),
  new F64(-Number.MAX_VALUE),
  new F64(Number.NaN),
  new F64(Infinity),
  new F64(-Infinity),
  new F64(-0),
  new F64(5e-324),
  new F64(-5e-324),
  new F64(-1),
  2n ** 64n - 1n,
  -(2n ** 63n),
  new F64(2 ** 53),
];

export const EXTREME_NUMBERS: Value[] = [
  new F64(1e308),
  new F64(-1e308),
  new F64(-0),
  new F64(5e-324),
  new F64(2.2250738585072014e-308),
  new F64(Number.NaN),
  new F64(Infinity),
  new F64(0.5),
  2n ** 64n - 1n,
  2n ** 63n,
  -(2n ** 63n),
  -1,
  -16,
  0,
  2 ** 31,
  2 ** 32 - 1,
  Number.MAX_SAFE_INTEGER,
];

export const WRONG_TYPES: Value[] = [
  'x'.repeat(40),
  '',
  true,
  null,
  new Uint8Array([1, 2, 3]),
  new Map<string, Value>([['type', 'BlockStored']]),
  [],
  [[[[[]]]]],
  new F64(1.5),
];
