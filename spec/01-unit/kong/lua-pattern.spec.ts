import { describe, expect, it } from 'vitest';
import { luaMatches, luaPatternToRegExp } from '../../../kong/stand-in/lua-pattern.js';

describe('Lua patterns (Kong match validators) as RegExp', () => {
  const cases: [string, string, boolean][] = [
    ['^rediss?://', 'redis://x', true],
    ['^rediss?://', 'rediss://x', true],
    ['^rediss?://', 'xredis://', false],
    ['^[A-Za-z0-9_.:%-]+$', 'kinf:a-b_c.d', true],
    ['^[A-Za-z0-9_.:%-]+$', 'kinf a', false],
    ['^[^:%s]+:%d+$', '10.0.0.7:8000', true],
    ['^[^:%s]+:%d+$', '10.0.0.7 :8000', false],
    ['%.', 'a.b', true],
    ['%.', 'ab', false],
    ['^%a+$', 'abcXYZ', true],
    ['^%a+$', 'abc1', false],
    ['^%w+$', 'ab12', true],
    ['^%x+$', 'deadBEEF', true],
    ['^%u%l+$', 'Kong', true],
    ['^%S+$', 'no-space', true],
    ['^%S+$', 'one space', false],
    ['^a.-b$', 'axxb', true],
    ['ab*c', 'xacx', true],
    ['^%[x%]$', '[x]', true],
    ['^[%]]$', ']', true],
    ['^[]]$', ']', true],
    ['^a$b', 'a$b', true],
  ];
  for (const [p, v, want] of cases)
    it(`${p} on ${JSON.stringify(v)} → ${want}`, () => expect(luaMatches(p, v)).toBe(want));

  it('is an unanchored search unless ^ is given, like string.find', () => {
    expect(luaMatches('b', 'abc')).toBe(true);
    expect(luaMatches('^b', 'abc')).toBe(false);
  });

  it('refuses what it does not implement', () => {
    expect(() => luaPatternToRegExp('%b()')).toThrow(/unsupported/);
    expect(() => luaPatternToRegExp('%f[%w]')).toThrow(/unsupported/);
    expect(() => luaPatternToRegExp('[%S]')).toThrow(/unsupported/);
    expect(() => luaPatternToRegExp('[abc')).toThrow(/missing/);
    expect(() => luaPatternToRegExp('abc%')).toThrow(/ends with/);
  });
});
