import { describe, expect, it } from 'vitest';
import { runFrameFuzz } from '../../../bench/lib/frame-fuzz/run.js';

/**
 * The seeded frame fuzz (bench/lib/frame-fuzz; `npm run bench:fuzz:frames` runs it long) in a short run: a
 * real `kinference collector` process, real ZeroMQ, a real redis-server; valid vLLM batches among mutated
 * frames of every class (extreme numbers, type confusion, truncation, lying lengths, garbage, huge arrays,
 * bad frame counts and sequence frames, sequence jumps, restart-looking frames).
 */
describe('frame fuzz (short, seeded)', () => {
  it(
    'the collector stays up and healthy, counts what it rejects, and its index equals the model of the valid events',
    { timeout: 180_000 },
    async () => {
      const r = await runFrameFuzz({ seed: 36, frames: 400, settleTimeoutMs: 60_000 });
      expect(r.collector.alive, r.collector.stderrTail).toBe(true);
      expect(r.collector.healthz).toBe(200);
      expect(r.settleMs).not.toBeNull();
      // Every class was sent, and the decoder's rejections were counted by reason.
      for (const k of [
        'extreme_ts',
        'extreme_number',
        'type_confusion',
        'truncated',
        'garbage',
        'seq_jump',
        'restart_look',
      ])
        expect(r.sentByKind[k], k).toBeGreaterThan(0);
      expect(r.rejected.decode_errors?.out_of_range).toBeGreaterThan(0);
      expect(r.rejected.invalid_events?.out_of_range).toBeGreaterThan(0);
      expect(r.rejected.malformed_frames?.all).toBeGreaterThan(0);
      expect(r.rejected.internal_errors).toEqual({});
      // Forged frames never cleared the pod for a restart.
      expect(r.replays.podClears.restart ?? 0).toBe(0);
      expect(r.index).not.toBeNull();
      expect(r.index!.mismatches, r.index!.example ?? '').toBe(0);
      expect(r.index!.chains).toBeGreaterThan(50);
    },
  );
});
