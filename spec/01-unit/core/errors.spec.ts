import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, KinferenceError, isKinferenceError } from '../../../src/core/errors.js';

describe('error registry', () => {
  it('docs/errors.md lists exactly the codes in src/core/errors.ts, with the same meaning', () => {
    const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
    const rows = new Map(
      [...doc.matchAll(/^\| `(KINF_ERR_[A-Z_]+)` \| (.+?) \|$/gm)].map((m) => [m[1]!, m[2]!]),
    );
    expect(new Map(Object.entries(ERROR_CODES))).toEqual(rows);
  });

  it('carries code and cause', () => {
    const cause = new Error('boom');
    const e = new KinferenceError('KINF_ERR_REDIS', 'redis failed', { cause });
    expect(e.code).toBe('KINF_ERR_REDIS');
    expect(e.cause).toBe(cause);
    expect(isKinferenceError(e, 'KINF_ERR_REDIS')).toBe(true);
    expect(isKinferenceError(e, 'KINF_ERR_CONFIG')).toBe(false);
    expect(isKinferenceError(cause)).toBe(false);
  });
});
