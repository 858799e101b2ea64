import { unpack, Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { EngineBlockHash, KvCacheEvent } from '../../../emulator/engine/types.js';
import { encodeKvEventBatch } from '../../../emulator/wire/kv-event-batch.js';
import { MsgpackWriter } from '../../../emulator/wire/msgpack-writer.js';

/** An engine hash whose low 64 bits (what goes on the wire) are `low`. */
const h = (low: string): EngineBlockHash => `${'ab'.repeat(24)}${low}` as EngineBlockHash;
const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const str = (s: string): Buffer => {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([Buffer.from([0xa0 | b.length]), b]);
};

// docs/collector.md#wire-format example: ts 1700000000.5, dp_rank 0, one BlockStored of tokens 1..16 with
// hash 0xDEADBEEF00000001 and parent 0x1122334455667788, one BlockRemoved of the parent.
const EVENTS: KvCacheEvent[] = [
  {
    type: 'BlockStored',
    blockHashes: [h('deadbeef00000001')],
    parentBlockHash: h('1122334455667788'),
    tokenIds: Array.from({ length: 16 }, (_, i) => i + 1),
    blockSize: 16,
    loraId: null,
    loraName: null,
    extraKeys: [null],
  },
  { type: 'BlockRemoved', blockHashes: [h('1122334455667788')] },
];
const TS = hex('cb 41 d9 54 fc 40 20 00 00');
const TOKENS = Buffer.concat([hex('dc 00 10'), Buffer.from(Array.from({ length: 16 }, (_, i) => i + 1))]);

describe('KV event batch encoding', () => {
  it('array form matches the worked example byte for byte', () => {
    const expected = Buffer.concat([
      hex('93'),
      TS,
      hex('92 98'),
      str('BlockStored'),
      hex('91 cf de ad be ef 00 00 00 01'),
      hex('cf 11 22 33 44 55 66 77 88'),
      TOKENS,
      hex('10 c0'),
      str('GPU'),
      hex('c0'),
      hex('93'),
      str('BlockRemoved'),
      hex('91 cf 11 22 33 44 55 66 77 88'),
      str('GPU'),
      hex('00'),
    ]);
    expect(encodeKvEventBatch(1700000000.5, EVENTS, { format: 'array' }).toString('hex')).toBe(
      expected.toString('hex'),
    );
  });

  it('map form matches the worked example byte for byte (274 bytes)', () => {
    const expected = Buffer.concat([
      hex('93'),
      TS,
      hex('92 8b'),
      str('type'),
      str('BlockStored'),
      str('block_hashes'),
      hex('91 cf de ad be ef 00 00 00 01'),
      str('parent_block_hash'),
      hex('cf 11 22 33 44 55 66 77 88'),
      str('token_ids'),
      TOKENS,
      str('block_size'),
      hex('10'),
      str('lora_id'),
      hex('c0'),
      str('medium'),
      str('GPU'),
      str('lora_name'),
      hex('c0'),
      str('extra_keys'),
      hex('91 c0'),
      str('group_idx'),
      hex('00'),
      str('kv_cache_spec_kind'),
      str('full_attention'),
      hex('84'),
      str('type'),
      str('BlockRemoved'),
      str('block_hashes'),
      hex('91 cf 11 22 33 44 55 66 77 88'),
      str('medium'),
      str('GPU'),
      str('group_idx'),
      hex('00'),
      hex('00'),
    ]);
    const got = encodeKvEventBatch(1700000000.5, EVENTS, { format: 'map' });
    expect(got.length).toBe(274);
    expect(got.toString('hex')).toBe(expected.toString('hex'));
  });

  it('AllBlocksCleared in both forms', () => {
    const ev: KvCacheEvent[] = [{ type: 'AllBlocksCleared' }];
    const arr = encodeKvEventBatch(1, ev, { format: 'array' });
    const map = encodeKvEventBatch(1, ev, { format: 'map' });
    expect(arr.subarray(10).toString('hex')).toBe(
      Buffer.concat([hex('91 91'), str('AllBlocksCleared'), hex('00')]).toString('hex'),
    );
    expect(map.subarray(10).toString('hex')).toBe(
      Buffer.concat([hex('91 81'), str('type'), str('AllBlocksCleared'), hex('00')]).toString('hex'),
    );
    // A whole-second timestamp is still a float64, as msgspec writes a Python float.
    expect(arr.subarray(0, 10).toString('hex')).toBe('93cb3ff0000000000000');
  });

  it('decodes with an independent decoder: LoRA, extra keys, nil parent, bytes hashes', () => {
    const stored: KvCacheEvent = {
      type: 'BlockStored',
      blockHashes: [h('0000000000000005'), h('ffffffffffffffff')],
      parentBlockHash: null,
      tokenIds: [1, 300, 70000, 151645].concat(Array.from({ length: 28 }, (_, i) => i)),
      blockSize: 16,
      loraId: 3,
      loraName: 'sql-lora',
      extraKeys: [['sql-lora', 'salt'], ['sql-lora']],
    };
    const u = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });
    const m = u.unpack(encodeKvEventBatch(12.25, [stored], { format: 'map', dataParallelRank: 2 })) as [
      number,
      Record<string, unknown>[],
      number,
    ];
    expect(m[0]).toBe(12.25);
    expect(m[2]).toBe(2);
    const ev = m[1][0] as Record<string, unknown>;
    expect(Object.keys(ev)[0]).toBe('type');
    expect(ev.block_hashes).toEqual([5, 0xffffffffffffffffn]);
    expect(ev.parent_block_hash).toBeNull();
    expect(ev.token_ids).toEqual(stored.tokenIds);
    expect(ev.lora_id).toBe(3);
    expect(ev.lora_name).toBe('sql-lora');
    expect(ev.extra_keys).toEqual([['sql-lora', 'salt'], ['sql-lora']]);
    expect('kv_cache_spec_sliding_window' in ev).toBe(false);

    const a = unpack(encodeKvEventBatch(1, [stored], { format: 'array', hashForm: 'bytes' })) as unknown[];
    const arr = (a[1] as unknown[][])[0] as unknown[];
    expect(arr).toHaveLength(8);
    expect(arr[0]).toBe('BlockStored');
    expect(Buffer.from((arr[1] as Uint8Array[])[0] as Uint8Array).toString('hex')).toBe(
      stored.blockHashes[0],
    );
    expect(arr[7]).toBe('sql-lora');
  });

  it('writes integers in their smallest form and round-trips them', () => {
    const cases: [bigint, string][] = [
      [0n, '00'],
      [127n, '7f'],
      [128n, 'cc80'],
      [65535n, 'cdffff'],
      [65536n, 'ce00010000'],
      [2n ** 32n, 'cf0000000100000000'],
      [-1n, 'ff'],
      [-33n, 'd0df'],
      [-(2n ** 63n), 'd38000000000000000'],
    ];
    for (const [v, want] of cases)
      expect(new MsgpackWriter().bigint(v).toBuffer().toString('hex')).toBe(want);
    const u = new Unpackr({ int64AsType: 'bigint' });
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }), fc.string(), (v, s) => {
        const out = u.unpack(new MsgpackWriter().arrayHeader(2).bigint(v).str(s).toBuffer()) as [
          bigint | number,
          string,
        ];
        expect(BigInt(out[0])).toBe(v);
        expect(out[1]).toBe(s);
      }),
    );
  });
});
