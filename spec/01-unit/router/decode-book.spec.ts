import { describe, expect, it } from 'vitest';
import { DecodeBook } from '../../../src/router/decode-book.js';

describe('DecodeBook (what the ITL guard knows of its own requests)', () => {
  it('keeps prefill work for the window, even after the response ended', () => {
    const book = new DecodeBook(10_000, 600_000);
    const a = book.add('pod-a', 1_000, 500, 4_000, 256);
    book.add('pod-a', 5_000, 700, 8_000, 128);
    book.add('pod-b', 5_000, 900, 100, 16);
    book.end(a);
    expect(book.recentWork('pod-a', 10_999)).toEqual([
      { atMs: 1_000, stallMs: 500 },
      { atMs: 5_000, stallMs: 700 },
    ]);
    expect(book.recentWork('pod-a', 11_000)).toEqual([{ atMs: 5_000, stallMs: 700 }]);
    expect(book.recentWork('pod-c', 0)).toEqual([]);
  });

  it('counts in-flight requests until their response ends, or until abandoned', () => {
    const book = new DecodeBook(10_000, 60_000);
    const a = book.add('pod-a', 0, 0, 4_000, 256);
    book.add('pod-a', 1_000, 0, 8_000, 128);
    expect(book.inFlight('pod-a', 2_000)).toEqual({ count: 2, contextTokens: 12_000, outputTokens: 384 });
    book.end(a);
    book.end(a); // twice: ignored
    book.end(12345); // unknown: ignored
    expect(book.inFlight('pod-a', 2_000)).toEqual({ count: 1, contextTokens: 8_000, outputTokens: 128 });
    // The log phase never came: dropped after maxFlightMs.
    expect(book.inFlight('pod-a', 61_000)).toEqual({ count: 0, contextTokens: 0, outputTokens: 0 });
  });

  it('bounds the flights that started before a scrape by what the scrape counted on the pod', () => {
    const book = new DecodeBook(10_000, 600_000);
    for (let i = 0; i < 5; i++) book.add('pod-a', i * 100, 0, 1_000, 100); // 5 sent, their log phases lost
    book.add('pod-a', 9_000, 0, 2_000, 100); // sent after the scrape's margin: not in its counts yet
    book.trimToScrape('pod-a', 8_000, 2); // the scrape saw 2 on the pod
    expect(book.inFlight('pod-a', 9_000)).toEqual({ count: 3, contextTokens: 4_000, outputTokens: 300 });
    book.trimToScrape('pod-a', 8_000, 0); // an idle pod: only the one still on its way counts
    expect(book.inFlight('pod-a', 9_000)).toEqual({ count: 1, contextTokens: 2_000, outputTokens: 100 });
    book.trimToScrape('pod-a', 10_000, 5); // more on the pod than ours: nothing to drop
    expect(book.inFlight('pod-a', 9_000).count).toBe(1);
  });

  it('forgets the work of a pod that left the fleet (swept on later adds)', () => {
    const book = new DecodeBook(10_000, 600_000);
    book.end(book.add('gone', 0, 500, 100, 16)); // answered; its prefill stays for the window
    for (let i = 1; i <= 2048; i++) book.end(book.add('pod-a', 20_000 + i, 1, 100, 16));
    // Not looked up since: its entry was dropped by a sweep, not kept until MAX_PER_POD.
    expect(book.podsWithWork()).toEqual(['pod-a']);
  });
});
