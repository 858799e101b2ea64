import { describe, expect, it, vi } from 'vitest';
import { logOnce, takeLogLines } from '../../../plugins/kinference/log-once.js';
import { exposedHeaders, shedResponse } from '../../../plugins/kinference/upstream-headers.js';
import type { RouteOutcome } from '../../../src/router/index.js';
import type { Prediction } from '../../../src/core/predictor.js';

const chosen = { podId: 'pod-b', predictedTtftMs: 1234.56, cachedTokens: 960 } as Prediction;
const base: RouteOutcome = {
  target: { host: '10.0.0.8', port: 8000, podId: 'pod-b' },
  decision: { candidates: [chosen], chosen, fallbackReason: null },
  fallbackReason: null,
  fallbackDetail: null,
  model: 'm',
  lora: null,
  promptTokens: 1000,
  truncated: false,
  blocks: 62,
  promptChars: { cached: 3000, tokenized: 1000 },
  timings: {
    parseMs: 0.5,
    templateMs: 0,
    tokenizeMs: 0,
    keysMs: 0,
    lookupMs: 0,
    predictMs: 0,
    totalMs: 1.23456,
  },
  shed: null,
  reservationId: 1,
  flightId: null,
  kvReuseReport: false,
  tenant: null,
  admission: null,
};

describe('upstream headers and the shed answer', () => {
  it('exposes the choice', () => {
    expect(exposedHeaders(base)).toEqual({
      'x-kinference-prompt-tokens': '1000',
      'x-kinference-route-ms': '1.235',
      'x-kinference-route-timings':
        'parse=0.500;template=0.000;tokenize=0.000;keys=0.000;lookup=0.000;predict=0.000',
      'x-kinference-pod': 'pod-b',
      'x-kinference-predicted-ttft-ms': '1234.6',
      'x-kinference-cached-tokens': '960',
    });
    const fb = exposedHeaders({
      ...base,
      target: null,
      decision: { candidates: [], chosen: null, fallbackReason: 'index_timeout' },
      fallbackReason: 'index_timeout',
    });
    expect(fb).toEqual({
      'x-kinference-prompt-tokens': '1000',
      'x-kinference-route-ms': '1.235',
      'x-kinference-route-timings':
        'parse=0.500;template=0.000;tokenize=0.000;keys=0.000;lookup=0.000;predict=0.000',
      'x-kinference-fallback': 'index_timeout',
    });
  });

  it('sheds with 429, Retry-After and an OpenAI-style error; every Args value defined', () => {
    const r = shedResponse({ ...base, shed: { retryAfterS: 3, status: 429 } });
    expect(r.status).toBe(429);
    expect(r.headers).toEqual({ 'Retry-After': '3', 'Content-Type': 'application/json' });
    expect(JSON.parse(r.body)).toEqual({
      error: {
        message: 'every pod is predicted over the TTFT SLO (best 1235 ms); retry later',
        type: 'rate_limit_error',
        code: 'ttft_slo_exceeded',
      },
    });
  });

  it('says when the ITL guard refused every pod (code itl_slo_exceeded)', () => {
    const refused = { ...chosen, withinItl: false, predictedItlMs: 187.4 } as Prediction;
    const r = shedResponse({
      ...base,
      decision: { candidates: [refused], chosen: refused, fallbackReason: null },
      shed: { retryAfterS: 7, status: 429 },
    });
    expect(r.headers['Retry-After']).toBe('7');
    expect(JSON.parse(r.body)).toEqual({
      error: {
        message: 'every pod is at its ITL bound or KV capacity (best 187 ms); retry later',
        type: 'rate_limit_error',
        code: 'itl_slo_exceeded',
      },
    });
  });

  it('logs at most once per key per minute, counting what it suppressed; lines wait for the log phase', () => {
    takeLogLines();
    expect(logOnce('k-test', 'first', 0)).toBe(true);
    expect(logOnce('k-test', 'again', 1000)).toBe(false);
    expect(logOnce('k-test', 'again', 2000)).toBe(false);
    expect(logOnce('k-test', 'later', 61_000)).toBe(true);
    expect(takeLogLines()).toEqual(['first', 'later (2 similar suppressed)']);
    expect(takeLogLines()).toEqual([]);
  });

  it('past 100 queued lines (no log phase to take them) the rest goes to stderr', () => {
    takeLogLines();
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      for (let i = 0; i < 101; i++) logOnce(`overflow-${i}`, `line ${i}`, 0);
      expect(write.mock.calls.map((c) => String(c[0]))).toEqual(['[kinference] line 100\n']);
      expect(takeLogLines()).toHaveLength(100);
    } finally {
      write.mockRestore();
    }
  });
});
