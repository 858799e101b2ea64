import { describe, expect, it } from 'vitest';
import { upstreamReport, type Serialized } from '../../../plugins/kinference/log-phase.js';
import {
  FIRST_BACKOFF_MS,
  MAX_BACKOFF_MS,
  UpstreamFailures,
  backoffMs,
} from '../../../src/router/upstream-failures.js';

describe('UpstreamFailures', () => {
  it('backs off exponentially from 1 s, capped', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 50].map(backoffMs)).toEqual([
      1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000,
    ]);
    expect(FIRST_BACKOFF_MS).toBe(1000);
    expect(MAX_BACKOFF_MS).toBe(30_000);
  });

  it('keeps a pod out until its window ends; a later failed try doubles it, a later success ends it', () => {
    const f = new UpstreamFailures();
    f.failed('a', 0, 1, 1, 'connection failed (502)');
    expect(f.skip('a', 999)).toEqual({ untilMs: 1000, strikes: 1, detail: 'connection failed (502)' });
    expect(f.skip('a', 1000)).toBeNull();
    expect(f.skip('b', 0)).toBeNull();
    f.failed('a', 1000, 2, 2, 'gateway error 504'); // decision 2 was made after the first failure
    expect(f.skip('a', 1000)).toMatchObject({ untilMs: 3000, strikes: 2, detail: 'gateway error 504' });
    f.succeeded('a', 3);
    expect(f.skip('a', 1000)).toBeNull();
    f.failed('a', 5000, 4, 4, 'x');
    expect(f.skip('a', 5000)?.untilMs).toBe(6000);
  });

  it('a failure or success of a request routed before the last failure was known is no news', () => {
    const f = new UpstreamFailures();
    f.failed('a', 0, 5, 7, 'x'); // decisions 6 and 7 were already sent there
    f.failed('a', 500, 6, 7, 'x');
    expect(f.skip('a', 500)).toMatchObject({ strikes: 1, untilMs: 1500 }); // extended, not doubled
    f.succeeded('a', 7);
    expect(f.skip('a', 600)).not.toBeNull();
    f.succeeded('a', 8);
    expect(f.skip('a', 600)).toBeNull();
  });
});

const stream = { 'content-type': 'text/event-stream' };

describe('upstreamReport (kong.log.serialize → passive health)', () => {
  it('real Kong: a refused connection or timeout shows as nginx’s upstream_status 502/504', () => {
    const s: Serialized = {
      upstream_status: '502',
      response: { status: 502 },
      tries: [{ ip: '10.0.0.1', port: 8000 }],
    };
    expect(upstreamReport(s)).toEqual({ failed: true, detail: 'gateway error 502' });
    expect(upstreamReport({ ...s, upstream_status: '504' })?.failed).toBe(true);
    expect(upstreamReport({ ...s, upstream_status: '502, 502' })?.failed).toBe(true);
    expect(upstreamReport({ ...s, upstream_status: '503' })?.failed).toBe(true);
  });

  it('the stand-in: no upstream_status, the try marked failed', () => {
    const s: Serialized = {
      response: { status: 502 },
      tries: [{ ip: '127.0.0.1', port: 9, state: 'failed', code: 502 }],
    };
    expect(upstreamReport(s)).toEqual({ failed: true, detail: 'connection failed (502)' });
  });

  it('any answer of the pod that is not a gateway error is a success', () => {
    for (const st of ['200', '400', '429', '500', '502 : 200', '502, 200'])
      expect(upstreamReport({ upstream_status: st, tries: [{}], response: { headers: stream } })).toEqual({
        failed: false,
        detail: `answered ${st.split(/[,:]/).pop()!.trim()}`,
      });
  });

  it('no try (another plugin answered in access) or no status: nothing is known', () => {
    expect(upstreamReport({ upstream_status: '', response: { status: 502 }, tries: [] })).toBeNull();
    expect(upstreamReport({ response: { status: 502 } })).toBeNull();
    expect(upstreamReport({ upstream_status: '', tries: [{ ip: '10.0.0.1' }] })).toBeNull();
  });
});
