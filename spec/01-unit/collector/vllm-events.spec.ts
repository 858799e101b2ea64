import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../../src/collector/events.js';
import { parseVllmBatch } from '../../../src/collector/wire/vllm-events.js';
import { readHexFixture, readJsonFixture } from '../../helpers/collector/fixtures.js';
import { encodeMsgspec, f64, OrderedMap } from '../../helpers/collector/msgspec-encoder.js';
import { encodeBatch, type EventSpec } from '../../helpers/collector/vllm-frames.js';

const WORKED: EventSpec[] = [
  {
    type: 'BlockStored',
    hashes: [0xdeadbeef00000001n],
    parent: 0x1122334455667788n,
    tokens: range(1, 17),
    blockSize: 16,
  },
  { type: 'BlockRemoved', hashes: [0x1122334455667788n] },
];
const WORKED_MAP: EventSpec[] = [
  {
    ...(WORKED[0] as Extract<EventSpec, { type: 'BlockStored' }>),
    extraKeys: [null],
    groupIdx: 0,
    specKind: 'full_attention',
  },
  { type: 'BlockRemoved', hashes: [0x1122334455667788n], groupIdx: 0 },
];

function range(a: number, b: number): number[] {
  return Array.from({ length: b - a }, (_, i) => a + i);
}

function ok(raw: Uint8Array): KvEventBatch {
  const r = parseVllmBatch(raw);
  if (!r.ok) throw new Error(`expected a batch, got ${r.reason}: ${r.detail}`);
  return r.batch;
}

describe('msgspec-like test encoder', () => {
  it('reproduces the worked example of docs/collector.md byte for byte, in both encodings', () => {
    expect(encodeBatch(WORKED, { format: 'array', ts: 1700000000.5, dpRank: 0 }).toString('hex')).toBe(
      readHexFixture('worked-example-array.hex').toString('hex'),
    );
    const map = encodeBatch(WORKED_MAP, { format: 'map', ts: 1700000000.5, dpRank: 0 });
    expect(map.toString('hex')).toBe(readHexFixture('worked-example-map.hex').toString('hex'));
    expect(map.length).toBe(274);
  });

  it('uses the smallest integer forms, like msgspec', () => {
    const hex = (v: Parameters<typeof encodeMsgspec>[0]): string => encodeMsgspec(v).toString('hex');
    expect(hex(127)).toBe('7f');
    expect(hex(128)).toBe('cc80');
    expect(hex(65535)).toBe('cdffff');
    expect(hex(65536)).toBe('ce00010000');
    expect(hex(2 ** 32)).toBe('cf0000000100000000');
    expect(hex(-1)).toBe('ff');
    expect(hex(-33)).toBe('d0df');
    expect(hex(-(2n ** 63n))).toBe('d38000000000000000');
    expect(hex(f64(2))).toBe('cb4000000000000000');
  });
});

describe('parseVllmBatch', () => {
  const expected = readJsonFixture<KvEventBatch & { events: unknown[] }>('worked-example.events.json');

  it('decodes the worked example (array_like) into the expected domain events', () => {
    const b = ok(readHexFixture('worked-example-array.hex'));
    expect({ tsSec: b.tsSec, dataParallelRank: b.dataParallelRank, events: b.events }).toEqual(expected);
    expect(b.unknownEvents + b.unknownFields).toBe(0);
  });

  it('decodes the worked example (tagged maps) into the same events, plus the newer optional fields', () => {
    const b = ok(readHexFixture('worked-example-map.hex'));
    const [stored, removed] = expected.events as unknown as [
      Record<string, unknown>,
      Record<string, unknown>,
    ];
    expect(b.events).toEqual([
      { ...stored, extraKeys: [null], groupIdx: 0, specKind: 'full_attention' },
      { ...removed, groupIdx: 0 },
    ]);
    expect(b.unknownFields).toBe(0);
  });

  it('keeps every bit of uint64 hashes beyond 2^53, reads signed int64 and bytes hashes', () => {
    const big = 2n ** 64n - 1n;
    const raw = encodeBatch(
      [
        {
          type: 'BlockStored',
          hashes: [big, 2n ** 53n + 1n, 7, -5n, -(2n ** 63n)],
          parent: null,
          tokens: range(0, 80),
          blockSize: 16,
        },
        { type: 'BlockRemoved', hashes: [new Uint8Array([0xde, 0xad, 0x00, 0x01])] },
      ],
      { format: 'array' },
    );
    const [s, r] = ok(raw).events;
    expect(s).toMatchObject({
      hashes: ['18446744073709551615', '9007199254740993', '7', '-5', '-9223372036854775808'],
      parent: null,
    });
    expect(r).toMatchObject({ hashes: ['dead0001'] });
  });

  it('accepts every BlockStored width vLLM has shipped (v0.9 … current) and counts trailing unknown fields', () => {
    const e: EventSpec = {
      type: 'BlockStored',
      hashes: [1n],
      parent: null,
      tokens: range(0, 16),
      blockSize: 16,
      loraId: null,
      medium: 'CPU',
      extraKeys: [null],
      groupIdx: 1,
      specKind: 'full_attention',
    };
    for (const storedFields of [5, 6, 7, 11]) {
      const b = ok(encodeBatch([e], { format: 'array', storedFields, removedFields: 1 }));
      expect(b.events[0]).toMatchObject({
        kind: 'stored',
        hashes: ['1'],
        tier: storedFields >= 6 ? 'CPU' : 'GPU',
      });
      expect(b.unknownFields).toBe(0);
    }
    // A future field appended in array mode, and an unknown key in map mode.
    const longer = encodeMsgspec([
      f64(1),
      [
        [
          'BlockStored',
          [1],
          null,
          range(0, 16),
          16,
          null,
          'GPU',
          null,
          null,
          0,
          'full_attention',
          null,
          'LOCAL',
          'x',
        ],
      ],
    ]);
    expect(ok(longer).unknownFields).toBe(2);
    const mapped = encodeMsgspec([
      f64(1),
      [
        new OrderedMap([
          ['type', 'BlockRemoved'],
          ['block_hashes', [1]],
          ['medium', 'GPU'],
          ['locality', 'REMOTE'],
        ]),
      ],
      0,
    ]);
    expect(ok(mapped)).toMatchObject({ unknownFields: 1, events: [{ kind: 'removed', hashes: ['1'] }] });
  });

  it('accepts the batch as [ts, events], [ts, events, rank, publisher_id] or a map', () => {
    const ev: EventSpec[] = [{ type: 'AllBlocksCleared' }];
    expect(ok(encodeBatch(ev, { format: 'array', noDpRank: true }))).toMatchObject({
      dataParallelRank: null,
      events: [{ kind: 'cleared' }],
    });
    expect(ok(encodeMsgspec([f64(5), [['AllBlocksCleared']], 3, 'pub-1']))).toMatchObject({
      dataParallelRank: 3,
      unknownFields: 1,
    });
    const asMap = encodeMsgspec(
      new OrderedMap([
        ['ts', f64(5)],
        ['events', [new OrderedMap([['type', 'AllBlocksCleared']])]],
        ['data_parallel_rank', 2],
      ]),
    );
    expect(ok(asMap)).toMatchObject({ tsSec: 5, dataParallelRank: 2, events: [{ kind: 'cleared' }] });
  });

  it('skips and counts unknown event types; treats parent 0 (llm-d-inference-sim) as no parent', () => {
    const raw = encodeMsgspec([
      f64(1),
      [
        ['SnapshotMarker', 1, 2],
        new OrderedMap([['type', 'Heartbeat']]),
        ['BlockStored', [9], 0, range(0, 16), 16, null, null, null],
      ],
      0,
    ]);
    const b = ok(raw);
    expect(b.unknownEvents).toBe(2);
    expect(b.events).toEqual([expect.objectContaining({ kind: 'stored', parent: null, tier: 'GPU' })]);
  });

  it('reads extra_keys: LoRA name taken off, cache_salt as a string, multimodal tuples opaque', () => {
    const raw = encodeBatch(
      [
        {
          type: 'BlockStored',
          hashes: [1n, 2n, 3n],
          parent: null,
          tokens: range(0, 48),
          blockSize: 16,
          loraId: 4,
          loraName: 'sql-lora',
          extraKeys: [['sql-lora', 'salt-1'], ['sql-lora'], ['sql-lora', ['img-hash', 3]]],
        },
      ],
      { format: 'map' },
    );
    expect(ok(raw).events[0]).toMatchObject({
      loraName: 'sql-lora',
      loraNameMissing: false,
      extraKeys: [{ strings: ['salt-1'], opaque: false }, null, { strings: [], opaque: true }],
    });
    const oldLora = encodeBatch(
      [{ type: 'BlockStored', hashes: [1n], parent: null, tokens: range(0, 16), blockSize: 16, loraId: 4 }],
      {
        format: 'array',
      },
    );
    expect(ok(oldLora).events[0]).toMatchObject({ loraName: null, loraNameMissing: true });
  });

  it('drops (and counts) events with fields of the wrong type, keeps the rest of the batch', () => {
    const raw = encodeMsgspec([
      f64(1),
      [
        ['BlockStored', 'not-a-list', null, [1], 16, null, 'GPU', null],
        ['BlockStored', [1], null, [1, 'x'], 16, null, 'GPU', null],
        ['BlockStored', [1], null, range(0, 16), 0, null, 'GPU', null],
        ['BlockRemoved', [1], 'TAPE'],
        ['BlockStored', [1, 2], null, range(0, 32), 16, null, 'GPU', null, [null]],
        [7],
        'BlockRemoved',
        ['BlockRemoved', [5], 'GPU'],
      ],
      0,
    ]);
    const b = ok(raw);
    // block_size 0 (a placeholder) is a number out of its range.
    expect(b.invalidEvents).toEqual({
      bad_field: 2,
      out_of_range: 1,
      unknown_medium: 1,
      extra_keys_length: 1,
      not_tagged: 2,
    });
    expect(b.events).toEqual([{ kind: 'removed', hashes: ['5'], tier: 'GPU', groupIdx: null }]);
  });

  it('fails cleanly on bad batches: not msgpack, truncated, wrong shape or field types', () => {
    const reason = (raw: Uint8Array): string => {
      const r = parseVllmBatch(raw);
      return r.ok ? 'ok' : r.reason;
    };
    expect(reason(new Uint8Array())).toBe('truncated');
    expect(reason(readHexFixture('worked-example-map.hex').subarray(0, 100))).toBe('truncated');
    expect(reason(encodeMsgspec('hello'))).toBe('batch_shape');
    expect(reason(encodeMsgspec([f64(1)]))).toBe('batch_shape');
    expect(reason(encodeMsgspec(['yesterday', []]))).toBe('batch_field');
    expect(reason(encodeMsgspec([f64(1), 'events']))).toBe('batch_field');
    expect(reason(encodeMsgspec([f64(1), [], -1]))).toBe('out_of_range');
    expect(reason(encodeMsgspec([f64(1), [], 'zero']))).toBe('batch_field');
    expect(reason(Buffer.from('9000', 'hex'))).toBe('msgpack'); // trailing bytes after a complete value
    expect(reason(Buffer.from('c1', 'hex'))).not.toBe('ok'); // the never-used type byte
  });

  it('never throws: every prefix of a real payload, and arbitrary bytes', () => {
    for (const name of ['worked-example-array.hex', 'worked-example-map.hex']) {
      const full = readHexFixture(name);
      for (let n = 0; n < full.length; n++) expect(parseVllmBatch(full.subarray(0, n)).ok).toBe(false);
    }
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        parseVllmBatch(bytes);
      }),
      { numRuns: 2000 },
    );
  });
});
