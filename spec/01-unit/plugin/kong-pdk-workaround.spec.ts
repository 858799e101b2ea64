import { describe, expect, it } from 'vitest';
import {
  exitingEventId,
  finishedEventId,
  installBinaryJsonShortcut,
} from '../../../plugins/kinference/kong-pdk-workaround.js';

describe('kong-pdk listener workaround (binary toJSON)', () => {
  it('can be turned off', () => {
    expect(installBinaryJsonShortcut({ KINFERENCE_KEEP_BUFFER_JSON: '1' })).toBe(false);
    expect(JSON.stringify(Buffer.from('ab'))).toBe('{"type":"Buffer","data":[97,98]}');
  });

  it("makes kong-pdk's debug stringify of a body O(1), and changes nothing else", () => {
    const body = Buffer.alloc(65536, 97).subarray(0, 65000); // what kong-pdk decodes: a Buffer view
    const args = [{ EventId: 1, Data: body }];
    expect(JSON.stringify(args).length).toBeGreaterThan(65000); // the debug line today
    expect(installBinaryJsonShortcut({})).toBe(true);
    expect(installBinaryJsonShortcut({})).toBe(true);
    expect(JSON.stringify(args)).toBe('[{"EventId":1,"Data":"<65000 bytes>"}]');
    expect(JSON.stringify(new Uint8Array(3))).toBe('"<3 bytes>"');
    expect(JSON.stringify({ a: [1, 2], s: 'x', n: null })).toBe('{"a":[1,2],"s":"x","n":null}');
    expect(Object.keys(new Uint8Array(2))).toEqual(['0', '1']);
    expect(Buffer.from('ab').toString()).toBe('ab');
  });
});

describe('kong-pdk event cleanup', () => {
  it('forgets an event answered "ret" by HandleEvent at once, or handing Kong an exit', () => {
    expect(finishedEventId({ Data: 'ret', EventId: 7 })).toBe(7);
    expect(finishedEventId({ Data: { Method: 'kong.request.get_headers' }, EventId: 7 })).toBeNull();
    expect(exitingEventId({ Data: { Method: 'kong.response.exit', Args: [429] }, EventId: 8 })).toBe(8);
    expect(exitingEventId({ Data: 'ret', EventId: 8 })).toBeNull();
  });
});
