import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The benchmarks without a schedule of their own, as CI runs them: few runs (KINF_BENCH_*), from a scratch
 * directory (each writes bench/results/<name>.json under the working directory), so that a change that
 * breaks one shows here and not the next time someone measures. Figures are not checked: only that each
 * runs to the end and that what it measured is what it says.
 */
interface Stats {
  n: number;
  p50: number;
}

describe('benchmarks, small runs', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'kinf-bench-small-'));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  const run = (name: string, env: Record<string, string>, nodeArgs: string[] = []): unknown => {
    const script = fileURLToPath(new URL(`../../../dist/bench/${name}.js`, import.meta.url));
    const r = spawnSync(process.execPath, [...nodeArgs, script], {
      cwd,
      encoding: 'utf8',
      timeout: 170_000,
      env: { ...process.env, ...env },
    });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    return JSON.parse(readFileSync(join(cwd, `bench/results/${name}.json`), 'utf8'));
  };

  interface Lookup {
    count: number;
    meanBestPrefixBlocks: number;
    serverUsec: { calls: number; slowlogCount: number; p50: number };
    roundTripMs: { p50: number };
  }
  interface Memory {
    entries: number;
    distinctBlocks: number;
    blockKeysInRedis: number;
    bytesPerEntry: number;
  }

  it('bench:index measures both Redis kinds, and a Cluster lookup gives the same answers with one EVALSHA on the slot owner', () => {
    const { withTtl, cluster } = run('index', { KINF_BENCH_ENTRIES: '5000', KINF_BENCH_LOOKUPS: '200' }) as {
      withTtl: { memory: Memory; applyFill: { ops: number }; lookup: Lookup };
      cluster: { primaries: number; memoryOnSlotOwner: Memory; applyFill: { ops: number }; lookup: Lookup };
    };
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
  }, 160_000);

  it('bench:plugin times every path and routes each 64 KB body to the pod holding its prefix, in 4 PDK calls', () => {
    const out = run('plugin', { KINF_BENCH_REQUESTS: '10' }) as {
      path64k: {
        server: string;
        pdkCalls: number;
        exposedOutcomes: Record<string, number>;
        handleEventToRetMs: Stats;
      }[];
      routing64kInProcess: Record<string, Record<string, Stats>>;
      bodySizes: { bodyBytes: number; stock: { totalMs: Stats } }[];
      transportOnly: { bodyBytes: number; stock: Stats }[];
    };
    expect(out.path64k.length).toBeGreaterThanOrEqual(2); // Qwen3 on the stock server, o200k; + patched
    for (const p of out.path64k) {
      expect(p.pdkCalls, p.server).toBe(4);
      // Every decision routed on the prompt goes to pod-b, which holds the shared system prompt. A loaded CI
      // host may push one past decision_budget_ms or its lookup past redis_timeout_ms (the default 25 ms; seen
      // at load 8-9): it is then routed on load, and says so.
      const outcomes = Object.entries(p.exposedOutcomes);
      const routed = outcomes.filter(([k]) => k.endsWith(' routed'));
      expect(
        routed.map(([k]) => k),
        p.server,
      ).toEqual(['10.0.0.8 routed']);
      for (const [k] of outcomes)
        expect(k, p.server).toMatch(/ (routed|decision_budget_exceeded|index_timeout)$/);
      expect(p.handleEventToRetMs.n).toBeGreaterThanOrEqual(2);
      expect(p.handleEventToRetMs.p50).toBeGreaterThan(0);
    }
    expect(Object.keys(out.routing64kInProcess.qwen3!)).toEqual(
      expect.arrayContaining(['tokenizeMs', 'lookupMs', 'predictMs']),
    );
    expect(out.bodySizes.map((b) => b.stock.totalMs.n).every((n) => n >= 2)).toBe(true);
    expect(out.transportOnly).toHaveLength(out.bodySizes.length);
  }, 180_000);

  it('bench:overhead finds the cached prefix and times warm and cold decisions', () => {
    const o = run('overhead', { KINF_BENCH_WARM: '5', KINF_BENCH_COLD: '2' }) as {
      setup: { warm_runs: number; cold_runs: number; prompt_tokens: number };
      chosen_cached_tokens: number;
      decision_ms: Record<'warm' | 'cold', { p50: number }>;
      index_bytes_per_entry: number;
    };
    expect(o.setup.warm_runs).toBe(5);
    expect(o.setup.cold_runs).toBe(2);
    expect(o.chosen_cached_tokens).toBeGreaterThan(o.setup.prompt_tokens / 2);
    expect(o.decision_ms.warm.p50).toBeGreaterThan(0);
    expect(o.decision_ms.cold.p50).toBeGreaterThan(0);
    expect(o.index_bytes_per_entry).toBeGreaterThan(0);
  }, 160_000);

  it('bench:emulator calibrates every profile and serves requests in virtual time and live', () => {
    const e = run('emulator', { KINF_BENCH_REQUESTS: '10', KINF_BENCH_LIVE: '5' }) as {
      calibration: Record<string, Record<string, number>>;
      engine_speed_control_l40s: { requests: number; mean_ttft_s: number };
      live_overhead_time_scale_1: { samples: number };
    };
    expect(Object.keys(e.calibration)).toEqual(expect.arrayContaining(['l40s-27b-fp8', 'h100-27b-fp8']));
    expect(e.engine_speed_control_l40s.requests).toBe(10);
    expect(e.engine_speed_control_l40s.mean_ttft_s).toBeGreaterThan(0);
    expect(e.live_overhead_time_scale_1.samples).toBe(5);
  }, 160_000);

  it('bench:tokenizers runs both engines on both tokenizers, from any directory', () => {
    const t = run('tokenizers', { KINF_BENCH_FIRST: '1', KINF_BENCH_COLD: '2', KINF_BENCH_WARM: '2' });
    const text = JSON.stringify(t);
    for (const s of ['o200k_harmony', 'Qwen3', 'js-bpe', 'native']) expect(text).toContain(s);
  }, 160_000);

  it('bench:collector (1-second phases): a restart with the handoff keeps every cached block, without it they are lost', () => {
    const c = run('collector', { KINF_BENCH_SECONDS: '1' }, ['--expose-gc']) as {
      lag: { batches: number; p50Ms: number };
      throughput: { blockEvents: number; published: number; caughtUp: boolean }[];
      restarts: {
        handoff: boolean;
        indexedShare: number;
        resumed: number;
        cleared: number;
        caughtUp: boolean;
      }[];
    };
    expect(c.lag.batches).toBeGreaterThan(0);
    expect(c.lag.p50Ms).toBeGreaterThan(0);
    for (const t of c.throughput) {
      expect(t.caughtUp).toBe(true);
      expect(t.blockEvents).toBe(t.published);
    }
    const [kept, lost] = [c.restarts.find((r) => r.handoff)!, c.restarts.find((r) => !r.handoff)!];
    expect(kept).toMatchObject({ indexedShare: 1, cleared: 0, caughtUp: true });
    expect(kept.resumed).toBeGreaterThan(0);
    expect(lost.cleared).toBeGreaterThan(0);
    expect(lost.indexedShare).toBeLessThan(1);
  }, 160_000);
});
