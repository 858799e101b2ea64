import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseReservationMember, reservationMember } from '../../../src/index/reservation-member.js';

describe('shared reservation as a ZSET member', () => {
  it('round-trips any reservation, with or without its class, whatever its pod id holds', () => {
    const cls = fc.record({
      priority: fc.integer({ min: -1000, max: 1000 }),
      objectiveMs: fc.nat(),
      expectedTtftMs: fc.nat(),
      ownMs: fc.nat(),
    });
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

  it('refuses a member that is not one', () => {
    for (const m of ['', 'a|1|2|3', '|1|2|3|pod', 'a|x|2|3|pod'])
      expect(() => parseReservationMember(m, 0)).toThrow(/KINF_ERR_INDEX_REPLY|malformed/);
  });
});
