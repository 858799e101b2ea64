/**
 * `node --expose-gc --import tsx bench/debug/segment-cache-cost.ts`: what one segment-cache entry really
 * costs the process (V8 heap, off-heap array data, RSS) against what SegmentCache counts for it
 * (`SegmentCache.entryBytes`), for segments of 4 to 400 tokens keyed as the soak's questions are. The
 * per-entry overhead in src/tokenize/segment-cache.ts comes from this.
 */
import { SegmentCache, segmentKey } from '../../src/tokenize/segment-cache.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const N = 100_000;
for (const tokens of [4, 15, 60, 400]) {
  const c = new SegmentCache(1 << 30, 1_000_000);
  gc();
  const m0 = process.memoryUsage();
  for (let i = 0; i < N; i++) {
    const text = `Question ${i}: what does clause ${i % 97} say about item ${i}?`;
    c.set(segmentKey(text, false), new Uint32Array(tokens).fill(i));
  }
  gc();
  const m1 = process.memoryUsage();
  const per = (a: number, b: number): string => ((b - a) / N).toFixed(0);
  console.log(
    `${tokens} tokens: counted ${(c.stats().bytes / N).toFixed(0)} B/entry; V8 heap ${per(m0.heapUsed, m1.heapUsed)}, ` +
      `array buffers ${per(m0.arrayBuffers, m1.arrayBuffers)}, RSS ${per(m0.rss, m1.rss)} B/entry`,
  );
}
