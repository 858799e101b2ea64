import { describe, expect, it } from 'vitest';
import {
  blockHashToU64,
  hashBlockTokens,
  noneHashFromSeed,
  RequestBlockHasher,
  toEngineBlockHash,
} from '../../../emulator/engine/block-hash.js';

const range = (a: number, b: number): number[] => Array.from({ length: b - a + 1 }, (_, i) => a + i);

describe('engine block hash (vLLM sha256_cbor chain)', () => {
  // vLLM's test vector (docs/emulator.md): PYTHONHASHSEED="0", sha256_cbor, tokens 1..16 then 17..32.
  it('reproduces the vLLM test vector', () => {
    const none = noneHashFromSeed('0');
    expect(none.toString('hex')).toBe('4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e');
    const h0 = hashBlockTokens(none, range(1, 16), 0, 16, null);
    expect(h0.toString('hex').startsWith('202da172')).toBe(true);
    expect(h0.toString('hex').endsWith('e6d332ea')).toBe(true);
    expect(blockHashToU64(toEngineBlockHash(h0))).toBe(3236607068019569386n);
    const h1 = hashBlockTokens(h0, range(17, 32), 0, 16, null);
    expect(h1.toString('hex').startsWith('4a0a3938')).toBe(true);
    expect(blockHashToU64(toEngineBlockHash(h1))).toBe(2758186210834249151n);
  });

  it('hashes only full blocks, incrementally and identically to a one-shot pass', () => {
    const none = noneHashFromSeed('7');
    const tokens = range(100, 150);
    const inc = new RequestBlockHasher(none, 16, null, null);
    const grow: number[] = [];
    for (const t of tokens) {
      grow.push(t);
      inc.update(grow);
    }
    const once = new RequestBlockHasher(none, 16, null, null);
    once.update(tokens);
    expect(inc.hashes).toHaveLength(3);
    expect(inc.hashes).toEqual(once.hashes);
  });

  it('puts the LoRA name in every block and cache_salt in block 0, so both change every hash', () => {
    const none = noneHashFromSeed('0');
    const tokens = range(1, 48);
    const plain = new RequestBlockHasher(none, 16, null, null);
    const lora = new RequestBlockHasher(none, 16, 'sql-lora', null);
    const salted = new RequestBlockHasher(none, 16, null, 'tenant-a');
    for (const h of [plain, lora, salted]) h.update(tokens);
    for (let i = 0; i < 3; i++) {
      expect(lora.hashes[i]).not.toBe(plain.hashes[i]);
      expect(salted.hashes[i]).not.toBe(plain.hashes[i]);
    }
    expect(lora.extraKeys(2)).toEqual(['sql-lora']);
    expect(salted.extraKeys(0)).toEqual(['tenant-a']);
    expect(salted.extraKeys(1)).toBeNull();
    const both = new RequestBlockHasher(none, 16, 'sql-lora', 'tenant-a');
    expect(both.extraKeys(0)).toEqual(['sql-lora', 'tenant-a']);
  });

  it('differs across NONE_HASH seeds (pods without a shared PYTHONHASHSEED)', () => {
    const a = new RequestBlockHasher(noneHashFromSeed('1'), 16, null, null);
    const b = new RequestBlockHasher(noneHashFromSeed('2'), 16, null, null);
    a.update(range(1, 16));
    b.update(range(1, 16));
    expect(a.hashes[0]).not.toBe(b.hashes[0]);
  });
});
