import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  getUriArgs,
  normalizePath,
  splitRequestTarget,
  unescapeArg,
} from '../../../kong/stand-in/uri-args.js';

describe('the stand-in reads request targets as nginx and Kong do, never throwing', () => {
  it('unescapes arguments like ngx_http_lua_unescape_uri: bad escapes stay, + is a space', () => {
    expect(unescapeArg('a%20b+c')).toBe('a b c');
    expect(unescapeArg('%zz%4%')).toBe('%zz%4%');
    expect(unescapeArg('%e4%bd%a0')).toBe('你');
    expect(unescapeArg('%ff')).toBe('\ufffd');
  });

  it('parses query args like ngx.req.get_uri_args (Kong’s examples), with its 100-argument default', () => {
    expect(getUriArgs('foo=hello%20world&bar=baz&zzz&blo=&bar=bla&bar')).toEqual({
      foo: 'hello world',
      bar: ['baz', 'bla', true],
      zzz: true,
      blo: '',
    });
    expect(getUriArgs('=x&&a=1=2')).toEqual({ a: '1=2' });
    const many = Array.from({ length: 150 }, (_, i) => `k${i}=${i}`).join('&');
    expect(Object.keys(getUriArgs(many))).toHaveLength(100);
    expect(Object.keys(getUriArgs(many, 3))).toEqual(['k0', 'k1', 'k2']);
  });

  it('normalizes paths like Kong’s get_path (its documented example)', () => {
    expect(normalizePath('/t/Abc%20123%C3%B8%2f/parent/..//test/./')).toBe('/t/Abc 123ø%2F/test/');
    expect(normalizePath('/a/%zz/%4')).toBe('/a/%zz/%4');
  });

  it('splits targets without an authority mix-up', () => {
    expect(splitRequestTarget('//x/y?q=1')).toEqual({ rawPath: '//x/y', rawQuery: 'q=1' });
    expect(splitRequestTarget('http://h:1/p?a')).toEqual({ rawPath: '/p', rawQuery: 'a' });
  });

  it('no target, query or path makes any of them throw', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        getUriArgs(s);
        normalizePath(s);
        const { rawPath, rawQuery } = splitRequestTarget(s);
        expect(rawPath.length + rawQuery.length).toBeLessThanOrEqual(s.length);
      }),
    );
  });
});
