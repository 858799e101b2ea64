import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseReservationMember, reservationMember } from '../../../src/index/reservation-member.js';

describe('shared reservation as a ZSET member', () => {
  it('round-trips any reservation, with or without its class, whatever its pod id holds', () => {
    const cls = fc.record(
      {
        priority: fc.integer({ min: -1000, max: 1000 }),
        objectiveMs: fc.nat(),
        expectedTtftMs: fc.nat(),
        ownMs: fc.nat(),
        squeezed: fc.constant(true),
      },
      { requiredKeys: ['priority', 'objectiveMs', 'expectedTtftMs', 'ownMs'] },
    );
    // Pod ids that look like the class field, and ones that hold the separator, as well as any text.
    const podId = fc.oneof(
      fc.string({ minLength: 1 }),
      fc.string().map((s) => `@c:${s}`),
      fc.tuple(cls, fc.string()).map(([c, s]) => `@c:${c.priority}:1:2:3|${s}`),
      fc.constant('@c:-|x'),
    );
    fc.assert(
      fc.property(
        fc.record(
          {
            router: fc.stringMatching(/^[0-9a-f]{1,12}$/),
            id: fc.nat(),
            podId,
            atMs: fc.nat(),
            uncachedTokens: fc.nat(),
            promptTokens: fc.nat(),
            cls,
          },
          { requiredKeys: ['router', 'id', 'podId', 'atMs', 'uncachedTokens', 'promptTokens'] },
        ),
        (r) => {
          expect(parseReservationMember(reservationMember(r), r.atMs)).toEqual(r);
        },
      ),
    );
  });

  it("a squeezed class's member reads, to a node that knows only four numbers, as a pod it does not know", () => {
    const m = reservationMember({
      router: 'ab',
      id: 1,
      podId: 'pod-a',
      atMs: 5,
      uncachedTokens: 10,
      promptTokens: 20,
      cls: { priority: 100, objectiveMs: 4000, expectedTtftMs: 900, ownMs: 300, squeezed: true },
    });
    expect(m).toBe('ab|1|10|20|@c:100:4000:900:300:1|pod-a');
    // What the parser before this field made of it: not a class field, so part of the pod id.
    expect(m.split('|').slice(4).join('|')).not.toBe('pod-a');
    expect(parseReservationMember(m, 5).cls).toMatchObject({ squeezed: true });
  });

  it('refuses a member that is not one', () => {
    for (const m of ['', 'a|1|2|3', '|1|2|3|pod', 'a|x|2|3|pod'])
      expect(() => parseReservationMember(m, 0)).toThrow(/KINF_ERR_INDEX_REPLY|malformed/);
  });
});
