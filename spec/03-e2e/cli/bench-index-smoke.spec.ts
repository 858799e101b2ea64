import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../../../dist/bench/index.js', import.meta.url));

interface LookupFigures {
  count: number;
  meanBestPrefixBlocks: number;
  serverUsec: { calls: number; slowlogCount: number; p50: number };
  roundTripMs: { p50: number };
}
interface MemoryFigures {
  entries: number;
  distinctBlocks: number;
  blockKeysInRedis: number;
  bytesPerEntry: number;
}

// bench:index as CI runs it: a small fill, the same figures on a standalone Redis and on a 3-shard Cluster.
describe('bench:index, small (KINF_BENCH_ENTRIES / _LOOKUPS)', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'kinf-bench-index-'));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it('measures both, and a Cluster lookup gives the same answers with one EVALSHA on the slot owner', () => {
    const r = spawnSync(process.execPath, [script], {
      cwd,
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, KINF_BENCH_ENTRIES: '5000', KINF_BENCH_LOOKUPS: '200' },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/standalone.*cluster/);
    const out = JSON.parse(readFileSync(join(cwd, 'bench/results/index.json'), 'utf8')) as {
      withTtl: { memory: MemoryFigures; applyFill: { ops: number }; lookup: LookupFigures };
      cluster: {
        primaries: number;
        memoryOnSlotOwner: MemoryFigures;
        applyFill: { ops: number };
        lookup: LookupFigures;
      };
    };
    const { withTtl, cluster } = out;
    expect(cluster.primaries).toBe(3);
    for (const l of [withTtl.lookup, cluster.lookup]) {
      expect(l.count).toBe(200);
      // Every lookup is exactly one script call on the server that holds the model (the slot's primary).
      expect(l.serverUsec.calls).toBe(200);
      expect(l.serverUsec.slowlogCount).toBe(200);
      expect(l.serverUsec.p50).toBeGreaterThan(0);
      expect(l.roundTripMs.p50).toBeGreaterThan(0);
    }
    expect(cluster.lookup.meanBestPrefixBlocks).toBe(withTtl.lookup.meanBestPrefixBlocks);
    expect(withTtl.lookup.meanBestPrefixBlocks).toBeGreaterThan(0);
    for (const m of [withTtl.memory, cluster.memoryOnSlotOwner]) {
      expect(m.entries).toBeGreaterThanOrEqual(5000);
      expect(m.blockKeysInRedis).toBe(m.distinctBlocks);
      expect(m.bytesPerEntry).toBeGreaterThan(0);
    }
    expect(cluster.applyFill.ops).toBe(withTtl.applyFill.ops);
  }, 150_000);
});
