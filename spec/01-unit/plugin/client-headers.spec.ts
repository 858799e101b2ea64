import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  gatewayOwnedHeaders,
  isGatewayOwned,
  MAX_GATEWAY_OWNED_HEADERS,
  refuseHeaders,
} from '../../../plugins/kinference/client-headers.js';
import { MAX_REQUEST_HEADERS, type RequestHeaders } from '../../../plugins/kinference/pdk.js';

describe('client-sent headers only the gateway may set', () => {
  it('are x-data-parallel-rank and x-kinference-* (get_headers lower-cases names), nothing else', () => {
    for (const n of ['x-data-parallel-rank', 'x-kinference-pod', 'x-kinference-'])
      expect(isGatewayOwned(n), n).toBe(true);
    for (const n of [
      'x-kinference',
      'x-data-parallel-size',
      'traceparent',
      'x-kinferencepod',
      'kinference-pod',
    ])
      expect(isGatewayOwned(n), n).toBe(false);
  });

  it('every owned name is listed once, whatever else the request carries', () => {
    const name = fc.oneof(
      fc.constantFrom('x-data-parallel-rank', 'content-length', 'traceparent'),
      fc.string({ maxLength: 12 }).map((s) => `x-kinference-${s.toLowerCase()}`),
      fc.string({ maxLength: 12 }).map((s) => s.toLowerCase()),
    );
    fc.assert(
      fc.property(fc.dictionary(name, fc.array(fc.string(), { minLength: 1, maxLength: 3 })), (h) => {
        const owned = gatewayOwnedHeaders(h);
        expect(new Set(owned).size).toBe(owned.length);
        expect(owned.sort()).toEqual(Object.keys(h).filter(isGatewayOwned).sort());
      }),
    );
  });

  it(`more than ${MAX_GATEWAY_OWNED_HEADERS} owned names: 400 naming the headers`, () => {
    const h: RequestHeaders = {};
    for (let i = 0; i < MAX_GATEWAY_OWNED_HEADERS; i++) h[`x-kinference-${i}`] = ['1'];
    expect(refuseHeaders(h, gatewayOwnedHeaders(h))).toBeNull();
    h['x-data-parallel-rank'] = ['0'];
    const r = refuseHeaders(h, gatewayOwnedHeaders(h))!;
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'gateway_headers_not_allowed' } });
    expect(r.body).toContain('x-data-parallel-rank');
  });

  it(`${MAX_REQUEST_HEADERS} header lines or more (get_headers may have cut some off): 431`, () => {
    const h: RequestHeaders = { x: Array.from({ length: MAX_REQUEST_HEADERS - 2 }, () => '1') };
    h['content-length'] = ['10'];
    expect(refuseHeaders(h, [])).toBeNull();
    h['x-other'] = ['1'];
    const r = refuseHeaders(h, [])!;
    expect(r.status).toBe(431);
    expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'too_many_headers' } });
    expect(r.body).toContain(`fewer than ${MAX_REQUEST_HEADERS}`);
  });
});
