import { describe, expect, it } from 'vitest';
import { bodyGate } from '../../../plugins/kinference/body-gate.js';
import { MAX_REQUEST_HEADERS } from '../../../plugins/kinference/pdk.js';

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

  it('with as many header lines as Kong reads and no Content-Length among them, the size is unknown, not empty', () => {
    const many: Record<string, string[]> = {};
    for (let i = 0; i < MAX_REQUEST_HEADERS - 2; i++) many[`x-h${i}`] = ['1'];
    many['x-repeated'] = ['a', 'b']; // each repeat is a line
    expect(bodyGate(many, MAX)).toMatchObject({ read: false, reason: 'body_length_unknown' });
    delete many['x-h0'];
    expect(bodyGate(many, MAX)).toMatchObject({ read: false, reason: 'body_empty' });
    expect(bodyGate({ ...many, 'x-h0': ['1'], 'content-length': ['10'] }, MAX)).toEqual({ read: true });
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
