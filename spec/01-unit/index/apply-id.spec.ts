import { describe, expect, it } from 'vitest';
import {
  checkApplyId,
  compareApplyRecords,
  formatApplyRecord,
  lossReason,
  nextApplyId,
  parseApplyRecord,
} from '../../../src/index/apply-id.js';

describe('apply ids and records', () => {
  it('hands out ids of one writer per process, seq strictly increasing', () => {
    const ids = Array.from({ length: 5 }, () => nextApplyId());
    expect(new Set(ids.map((i) => i.writer)).size).toBe(1);
    expect(ids[0]!.writer).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    for (let i = 1; i < ids.length; i++) expect(ids[i]!.seq).toBeGreaterThan(ids[i - 1]!.seq);
    for (const id of ids) expect(() => checkApplyId(id)).not.toThrow();
  });

  it('refuses writers that would break the record format, and non-positive or fractional seqs', () => {
    for (const bad of [
      { writer: '', seq: 1 },
      { writer: 'a:b', seq: 1 },
      { writer: 'x'.repeat(65), seq: 1 },
      { writer: 'w', seq: 0 },
      { writer: 'w', seq: 2.5 },
      { writer: 'w', seq: 2 ** 60 },
    ])
      expect(() => checkApplyId(bad)).toThrow(expect.objectContaining({ code: 'KINF_ERR_INTERNAL' }));
  });

  it('formats and parses "writer:seq:part"', () => {
    const r = { writer: 'Ab_9-x', seq: 2 ** 40 + 3, part: 12 };
    expect(formatApplyRecord(r)).toBe(`Ab_9-x:${2 ** 40 + 3}:12`);
    expect(parseApplyRecord(formatApplyRecord(r))).toEqual(r);
    for (const bad of [null, undefined, '', 'w:1', 'w:x:1', ':1:1', 'w:1:1:1'])
      expect(parseApplyRecord(bad)).toBeNull();
  });

  it('orders records of a writer by (seq, part)', () => {
    const r = (seq: number, part: number) => ({ writer: 'w', seq, part });
    expect(compareApplyRecords(r(3, 1), r(2, 9))).toBeGreaterThan(0);
    expect(compareApplyRecords(r(3, 1), r(3, 2))).toBeLessThan(0);
    expect(compareApplyRecords(r(3, 2), r(3, 2))).toBe(0);
  });

  it('tells a lost write from a kept one: missing, rolled back, overwritten, or null', () => {
    const floor = { writer: 'w', seq: 10, part: 2 };
    expect(lossReason({ writer: 'w', seq: 10, part: 2 }, floor)).toBeNull();
    expect(lossReason({ writer: 'w', seq: 11, part: 1 }, floor)).toBeNull(); // a later write (unconfirmed)
    expect(lossReason(null, floor)).toBe('missing');
    expect(lossReason({ writer: 'w', seq: 10, part: 1 }, floor)).toBe('rolled_back');
    expect(lossReason({ writer: 'w', seq: 3, part: 5 }, floor)).toBe('rolled_back');
    expect(lossReason({ writer: 'v', seq: 99, part: 1 }, floor)).toBe('overwritten');
  });
});
