import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseReservationMember, reservationMember } from '../../../src/index/reservation-member.js';

describe('shared reservation as a ZSET member', () => {
  it('round-trips any reservation, whatever its pod id holds', () => {
    fc.assert(
      fc.property(
        fc.record({
          router: fc.stringMatching(/^[0-9a-f]{1,12}$/),
          id: fc.nat(),
          podId: fc.string({ minLength: 1 }),
          atMs: fc.nat(),
          uncachedTokens: fc.nat(),
          promptTokens: fc.nat(),
        }),
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
