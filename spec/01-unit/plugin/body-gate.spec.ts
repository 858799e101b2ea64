import { describe, expect, it } from 'vitest';
import { bodyGate } from '../../../plugins/kinference/body-gate.js';

const MAX = 32768;

describe('bodyGate: the body is fetched only when its headers say it is there and small enough', () => {
  it('reads a body with a Content-Length within max_body_bytes (the limit itself included)', () => {
    expect(bodyGate({ 'content-length': ['5000'] }, MAX)).toEqual({ read: true });
    expect(bodyGate({ 'content-length': [String(MAX)] }, MAX)).toEqual({ read: true });
  });

  it('skips a body over max_body_bytes, saying both sizes', () => {
    expect(bodyGate({ 'content-length': [String(MAX + 1)] }, MAX)).toEqual({
      read: false,
      reason: 'body_too_large',
      detail: `body is ${MAX + 1} bytes, over max_body_bytes ${MAX}`,
    });
  });

  it('an absent body (GET, Content-Length 0) is body_empty, not body_not_json', () => {
    expect(bodyGate({}, MAX)).toMatchObject({ read: false, reason: 'body_empty' });
    expect(bodyGate({ 'content-length': ['0'] }, MAX)).toMatchObject({ read: false, reason: 'body_empty' });
  });

  it('a chunked body has no size until read: not read', () => {
    expect(bodyGate({ 'transfer-encoding': ['chunked'] }, MAX)).toMatchObject({
      read: false,
      reason: 'body_length_unknown',
    });
    expect(bodyGate({ 'content-length': ['12abc'] }, MAX)).toMatchObject({ reason: 'body_length_unknown' });
  });

  it('a compressed body is body_compressed, not invalid_utf8; identity is no encoding', () => {
    expect(bodyGate({ 'content-encoding': ['gzip'], 'content-length': ['10'] }, MAX)).toEqual({
      read: false,
      reason: 'body_compressed',
      detail: 'Content-Encoding gzip',
    });
    expect(bodyGate({ 'content-encoding': ['identity'], 'content-length': ['10'] }, MAX)).toEqual({
      read: true,
    });
  });
});
