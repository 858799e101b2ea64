import { describe, expect, it } from 'vitest';
import { fixMultiMap, luaShape, stepMethodFor } from '../../../kong/stand-in/bridge.js';
import { parseListen } from '../../../kong/stand-in/cli.js';
import { parseSize } from '../../../kong/stand-in/gateway.js';

describe("Kong's side of the bridge: value rules", () => {
  it('picks the Step method as mp_rpc.lua get_step_method does', () => {
    expect(stepMethodFor('kong.request.get_headers')).toBe('plugin.StepMultiMap');
    expect(stepMethodFor('kong.request.get_query')).toBe('plugin.StepMultiMap');
    expect(stepMethodFor('kong.client.get_credential')).toBe('plugin.StepCredential');
    expect(stepMethodFor('kong.router.get_route')).toBe('plugin.StepRoute');
    expect(stepMethodFor('kong.request.get_raw_body')).toBe('plugin.Step');
    expect(stepMethodFor('kong.service.set_target')).toBe('plugin.Step');
  });

  it('fix_mmap: every value an array, true an empty array', () => {
    expect(fixMultiMap({ a: 'x', b: ['y', 'z'], c: true })).toEqual({ a: ['x'], b: ['y', 'z'], c: [] });
    expect(fixMultiMap({})).toEqual({});
  });

  it('Lua tables: nil drops out, an empty table packs as an empty array', () => {
    expect(luaShape(null)).toBeUndefined();
    expect(luaShape({})).toEqual([]);
    expect(luaShape({ a: null, b: 1, c: {} })).toEqual({ b: 1, c: [] });
    expect(luaShape([1, null, 'x'])).toEqual([1, null, 'x']);
    const bytes = new Uint8Array([1, 2]);
    expect(luaShape(bytes)).toBe(bytes);
  });

  it('parses nginx sizes', () => {
    expect(parseSize('8k')).toBe(8192);
    expect(parseSize('4m')).toBe(4 << 20);
    expect(parseSize('100')).toBe(100);
    expect(parseSize('x')).toBeUndefined();
    expect(parseSize(undefined)).toBeUndefined();
  });

  it('parses --listen', () => {
    expect(parseListen('127.0.0.1:8000')).toEqual({ host: '127.0.0.1', port: 8000 });
    expect(parseListen(':9000')).toEqual({ host: '0.0.0.0', port: 9000 });
    expect(parseListen('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(() => parseListen('nope')).toThrow(/host:port/);
  });
});
