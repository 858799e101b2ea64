import { encode as msgpackEncode } from '@msgpack/msgpack';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MessageFramer, msgpackValueEnd } from '../../../plugins/kinference/rpc-framing.js';

/**
 * The framer below kong-pdk's listener: whatever the chunking, it hands on exactly the messages sent, each
 * whole and once; a multi-megabyte body is held until its last chunk (copied once), not re-joined per chunk.
 */

// Kong's side and kong-pdk both send plain msgpack (kong-pdk: @msgpack/msgpack, as here).
const encode = (v: unknown): Buffer => Buffer.from(msgpackEncode(v));
const encode32 = (v: unknown): Buffer => Buffer.from(msgpackEncode(v, { forceFloat32: true }));

/** Values of every msgpack type kong-pdk and Kong send: ints of each width, floats, str, bin, maps, arrays. */
const value = fc.letrec((tie) => ({
  leaf: fc.oneof(
    fc.integer(),
    fc.integer({ min: -(2 ** 31), max: 2 ** 32 - 1 }),
    fc.maxSafeInteger(),
    fc.double({ noNaN: true }),
    fc.boolean(),
    fc.constant(null),
    fc.string({ maxLength: 300 }),
    fc.uint8Array({ maxLength: 70_000 }),
  ),
  node: fc.oneof(
    { depthSize: 'small' },
    tie('leaf'),
    fc.array(tie('node'), { maxLength: 20 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('node'), { maxKeys: 20 }),
  ),
})).node;

function chunked(all: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (all.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const c of [...at, all.length]) {
    if (c > from) out.push(all.subarray(from, c));
    from = c;
  }
  return out;
}

describe('msgpack framing for the plugin server socket (plugins/kinference/rpc-framing.ts)', () => {
  it('finds where each value ends, and says how many bytes it needs before that', () => {
    fc.assert(
      fc.property(value, (v) => {
        const b = encode(v);
        expect(msgpackValueEnd(b)).toBe(b.length);
        expect(msgpackValueEnd(encode32(v))).toBe(encode32(v).length);
        expect(msgpackValueEnd(Buffer.concat([b, Buffer.from([0xc0])]))).toBe(b.length);
        for (const cut of [0, 1, Math.floor(b.length / 2), b.length - 1].filter((c) => c < b.length)) {
          const r = msgpackValueEnd(b.subarray(0, cut));
          expect(r).toEqual({ need: expect.any(Number) });
          expect((r as { need: number }).need).toBeGreaterThan(cut);
          expect((r as { need: number }).need).toBeLessThanOrEqual(b.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('hands on exactly the messages sent, each whole, however the socket cuts them', () => {
    fc.assert(
      fc.property(
        fc.array(value, { minLength: 1, maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 30 }),
        (values, cuts) => {
          const messages = values.map(encode);
          const framer = new MessageFramer();
          const out = chunked(Buffer.concat(messages), cuts).flatMap((c) => framer.push(c));
          expect(framer.passthrough).toBe(false);
          expect(out.map((m) => m.toString('hex'))).toEqual(messages.map((m) => m.toString('hex')));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('holds a 3.5 MB body (Kong sends it as one str) until its last 64 KiB chunk, then hands it on once', () => {
    const body = JSON.stringify({
      model: 'm',
      messages: Array.from({ length: 100_000 }, (_, i) => ({ role: 'user', content: `m${i}` })),
    });
    const message = encode([
      0,
      7,
      'plugin.HandleEvent',
      [{ InstanceId: 1, EventName: 'access', Data: body }],
    ]);
    expect(message.length).toBeGreaterThan(3_000_000);
    const framer = new MessageFramer();
    const chunks = chunked(
      message,
      Array.from({ length: Math.ceil(message.length / 65536) }, (_, i) => i * 65536),
    );
    const handed = chunks.map((c) => framer.push(c));
    expect(handed.slice(0, -1).every((h) => h.length === 0)).toBe(true);
    expect(handed.at(-1)!.map((m) => m.length)).toEqual([message.length]);
    expect(handed.at(-1)![0]!.equals(message)).toBe(true);
  });

  it('passes bytes that are no msgpack on as they come (the listener reports them, as without framing)', () => {
    const framer = new MessageFramer();
    expect(framer.push(Buffer.from([0x93, 0x01, 0xc1, 0x02]))).toEqual([
      Buffer.from([0x93, 0x01, 0xc1, 0x02]),
    ]);
    expect(framer.passthrough).toBe(true);
    expect(framer.push(Buffer.from([0x05]))).toEqual([Buffer.from([0x05])]);
  });
});
