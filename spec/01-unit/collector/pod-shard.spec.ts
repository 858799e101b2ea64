import { describe, expect, it } from 'vitest';
import { podShard, shardLeaseName } from '../../../src/collector/pod-shard.js';
import { parseFleetConfig } from '../../../src/config/fleet-config.js';

describe('pod shards (collector.shard_index of shard_count)', () => {
  it('splits a fleet about evenly, the same way in every process, with every DP rank on its pod’s shard', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `vllm-${i}`);
    const sizes = [0, 0, 0, 0];
    for (const id of ids) sizes[podShard(id, 4)]!++;
    for (const n of sizes) expect(n).toBeGreaterThan(200); // 250 each on average
    // Fixed values: a change of the hash would move pods between running collectors on an upgrade.
    expect(['pod-0', 'pod-1', 'pod-2', 'pod-3'].map((id) => podShard(id, 2))).toEqual([1, 0, 1, 0]);
    expect(podShard('vllm-7@dp3', 4)).toBe(podShard('vllm-7', 4));
    expect(ids.every((id) => podShard(id, 1) === 0)).toBe(true);
    expect(() => podShard('p', 0)).toThrow(/positive integer/);
  });

  it('names a shard’s lease only when the fleet is split', () => {
    expect(shardLeaseName({ index: 2, count: 4 })).toBe('2/4');
    expect(shardLeaseName({ index: 0, count: 1 })).toBe('');
    expect(shardLeaseName(undefined)).toBe('');
  });

  it('the fleet file refuses a shard_index not below shard_count', () => {
    const fleet = (collector: object): unknown =>
      parseFleetConfig(
        {
          redis_url: 'redis://127.0.0.1:6379/0',
          models: { m: { block_size: 16 } },
          pods: [{ id: 'p', model: 'm', address: '10.0.0.7:8000' }],
          collector,
        },
        'fleet.yaml',
        '/',
      );
    expect(() => fleet({ shard_index: 2, shard_count: 2 })).toThrow(
      /shard_index: 2 is not below shard_count \(2\)/,
    );
    expect(fleet({ shard_index: 1, shard_count: 2 })).toMatchObject({
      collector: { shard_index: 1, shard_count: 2 },
    });
  });
});
