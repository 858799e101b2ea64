import { describe, expect, it } from 'vitest';
import { defaultPodState } from '../../../src/index/index.js';
import { parseLookupReply } from '../../../src/index/lookup-reply.js';

describe('parseLookupReply', () => {
  it('turns script rows into pods sorted by id', () => {
    const r = parseLookupReply('m', [
      ['pod-b', 1, 2, 3, 'id=pod-b\nrunning=2\n'],
      ['pod-a', 0, 0, 0, 'id=pod-a\n'],
    ]);
    expect(r).toEqual({
      pods: [
        {
          state: defaultPodState({ model: 'm', podId: 'pod-a' }),
          prefixBlocks: { GPU: 0, CPU: 0, STORAGE: 0 },
        },
        {
          state: { ...defaultPodState({ model: 'm', podId: 'pod-b' }), running: 2 },
          prefixBlocks: { GPU: 1, CPU: 2, STORAGE: 3 },
        },
      ],
    });
    expect(parseLookupReply('m', [])).toEqual({ pods: [] });
  });

  it('accepts counts as strings (RESP variants)', () => {
    expect(parseLookupReply('m', [['p', '4', '5', '6', '']]).pods[0]!.prefixBlocks).toEqual({
      GPU: 4,
      CPU: 5,
      STORAGE: 6,
    });
  });

  it('rejects anything else with KINF_ERR_INDEX_REPLY', () => {
    for (const bad of [
      null,
      'OK',
      [['p', 1, 2, 3]],
      [[1, 1, 2, 3, '']],
      [['p', -1, 2, 3, '']],
      [['p', 1.5, 2, 3, '']],
      [['p', 1, 2, 3, 'state']],
      [['p', 1, 2, 3, '=x\n']],
      [['p', 1, 2, 3, ['id', 'p']]],
    ])
      expect(() => parseLookupReply('m', bad)).toThrow(
        expect.objectContaining({ code: 'KINF_ERR_INDEX_REPLY' }),
      );
  });
});
