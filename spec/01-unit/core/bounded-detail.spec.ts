import { describe, expect, it } from 'vitest';
import { boundedDetail, DETAIL_MAX_CHARS } from '../../../src/core/bounded-detail.js';
import { KinferenceError } from '../../../src/core/errors.js';

describe('boundedDetail: what went wrong, bounded, for logs, spans and fallback details', () => {
  it('cuts a text at DETAIL_MAX_CHARS and leaves a short one as it is', () => {
    expect(boundedDetail('x'.repeat(1000))).toBe('x'.repeat(DETAIL_MAX_CHARS));
    expect(boundedDetail('HTTP 500: oops')).toBe('HTTP 500: oops');
  });

  it('gives an error its message, prefixed once with its KINF_ERR_* code, within the bound', () => {
    expect(boundedDetail(new Error('plain'))).toBe('plain');
    expect(boundedDetail(new KinferenceError('KINF_ERR_REDIS', 'connection refused'))).toBe(
      'KINF_ERR_REDIS: connection refused',
    );
    expect(boundedDetail(new KinferenceError('KINF_ERR_REDIS', 'KINF_ERR_REDIS: already said'))).toBe(
      'KINF_ERR_REDIS: already said',
    );
    const long = boundedDetail(new KinferenceError('KINF_ERR_INTERNAL', 'y'.repeat(1000)));
    expect(long).toHaveLength(DETAIL_MAX_CHARS);
    expect(long.startsWith('KINF_ERR_INTERNAL: yyy')).toBe(true);
  });

  it('reads whatever else was thrown: a string, an object with a message, nothing', () => {
    expect(boundedDetail('a thrown string')).toBe('a thrown string');
    // A PDK or library rejection that is not an Error still says what it is, not "[object Object]".
    expect(boundedDetail({ message: 'rpc failed' })).toBe('rpc failed');
    expect(boundedDetail(null)).toBe('null');
    expect(boundedDetail(undefined)).toBe('undefined');
    expect(boundedDetail(42)).toBe('42');
  });
});
