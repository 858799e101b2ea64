import { describe, expect, it } from 'vitest';
import { KinferenceError } from '../../../src/core/errors.js';
import {
  asIndexError,
  failFastOptions,
  reconnectDelayMs,
  redactUrl,
  withDeadline,
} from '../../../src/index/redis-connection.js';

describe('redis connection policy', () => {
  it('never queues or replays commands, and connects lazily', () => {
    expect(failFastOptions()).toMatchObject({
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
    });
  });

  it('backs off from 50 ms to a 2 s cap and never gives up', () => {
    const delays = Array.from({ length: 20 }, (_, i) => reconnectDelayMs(i + 1));
    expect(delays.slice(0, 7)).toEqual([50, 100, 200, 400, 800, 1600, 2000]);
    expect(delays.every((d) => d > 0 && d <= 2000)).toBe(true);
    for (let i = 1; i < delays.length; i++) expect(delays[i]).toBeGreaterThanOrEqual(delays[i - 1]!);
  });

  it('turns a missed deadline into KINF_ERR_REDIS_TIMEOUT', async () => {
    const never = () => new Promise<never>(() => {});
    await expect(withDeadline(never, 5, 'lookup')).rejects.toMatchObject({ code: 'KINF_ERR_REDIS_TIMEOUT' });
    await expect(withDeadline(async () => 42, 1000, 'lookup')).resolves.toBe(42);
  });

  it('tells the work when its caller has given up, so a multi-call write sends nothing more', async () => {
    let seen: (() => boolean) | null = null;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const p = withDeadline(
      async (expired) => {
        seen = expired;
        expect(expired()).toBe(false);
        await gate;
        return expired();
      },
      5,
      'apply',
    );
    await expect(p).rejects.toMatchObject({ code: 'KINF_ERR_REDIS_TIMEOUT' });
    expect(seen!()).toBe(true);
    release();
  });

  it('hides the password of a Redis URL in logs', () => {
    expect(redactUrl('redis://user:secret@10.0.0.1:6379/0')).toBe('redis://***@10.0.0.1:6379/0');
    expect(redactUrl('rediss://10.0.0.1:6379')).toBe('rediss://10.0.0.1:6379');
  });

  it('maps foreign errors to KINF_ERR_REDIS and keeps coded ones', () => {
    const e = asIndexError(new Error('ECONNRESET'), 'apply');
    expect(e).toMatchObject({ code: 'KINF_ERR_REDIS', message: 'apply: ECONNRESET' });
    expect(e.cause).toBeInstanceOf(Error);
    const coded = new KinferenceError('KINF_ERR_INDEX_REPLY', 'x');
    expect(asIndexError(coded, 'lookup')).toBe(coded);
  });
});
