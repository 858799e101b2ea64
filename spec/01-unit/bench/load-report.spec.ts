import { describe, expect, it } from 'vitest';
import {
  compareLoads,
  loadMarkdown,
  loadWarnings,
  summarizeLoad,
  type LoadCell,
  type LoadResultsFile,
} from '../../../bench/lib/load/report.js';
import type { LoadRun } from '../../../bench/lib/load/run-load.js';
import { ratioText } from '../../../bench/lib/report/analyze.js';
import type { Slo } from '../../../bench/lib/stats/goodput.js';
import type { Profile, RequestRecord } from '../../../bench/lib/types.js';
import { PUBLISHED_SHAPES } from '../../../bench/lib/workload/workloads.js';

const slo: Slo = { ttftMs: 1000, itlMs: 100, basis: 'test' };

function rec(key: string, startMs: number, over: Partial<RequestRecord> = {}): RequestRecord {
  return {
    key,
    conversationId: key,
    turnIndex: 0,
    cluster: key,
    pod: '',
    status: 'successful',
    startMs,
    firstTokenMs: startMs + 500,
    lastTokenMs: startMs + 500 + 255 * 50,
    endMs: startMs + 500 + 255 * 50 + 1,
    promptTokens: 16_263,
    outputTokens: 256,
    cachedTokens: 0,
    ...over,
  };
}

const failed = { firstTokenMs: null, lastTokenMs: null, status: 'errored' as const, promptTokens: 0 };

function run(records: RequestRecord[], over: Partial<LoadRun> = {}): LoadRun {
  return {
    trial: 0,
    records,
    windowStartMs: 10_000,
    windowEndMs: 70_000,
    durationMs: 80_000,
    wallMs: 80_000,
    errors: {},
    rejected: [],
    aborted: null,
    ...over,
  };
}

function file(runs: LoadRun[]): LoadResultsFile {
  const profile: Profile = { kind: 'concurrent', streams: 2, warmupS: 10, measureS: 60, cooldownS: 10 };
  return {
    meta: { aborted: null } as LoadResultsFile['meta'],
    slo,
    cells: [{ profile, salts: ['s'], summary: summarizeLoad(runs, slo, 'control', PUBLISHED_SHAPES), runs }],
  };
}

describe('bench:load summary', () => {
  it('counts the gateway’s 429s apart from failures, and only those within the measure window', () => {
    const r = run(
      [
        rec('ok', 20_000),
        rec('late', 5_000),
        rec('shed', 30_000, failed),
        rec('broken', 31_000, failed),
        // Answered at once, long before the window opens (GuideLLM's overlap rule leaves it out).
        rec('shed-in-warmup', 1_000, { ...failed, endMs: 1_005 }),
      ],
      { rejected: ['shed', 'shed-in-warmup'], errors: { 'HTTP 500: boom': 1 } },
    );
    const s = summarizeLoad([r], slo, 'control', PUBLISHED_SHAPES);
    expect(s).toMatchObject({
      sent: 5,
      measured: 2,
      rejected429: 1,
      errored: 1,
      errors: { 'HTTP 500: boom': 1 },
    });
    // Goodput counts completions inside the window within the SLO: both successes end inside it.
    expect(s.goodputPerMin).toBe(2);
    expect(loadWarnings(file([r]))).toEqual(['1 request failed (33.3%): see failures.']);
  });

  it('warns when the server counts other prompt sizes than were sent (another tokenizer)', () => {
    const exact = file([run([rec('a', 20_000)])]);
    expect(loadWarnings(exact)).toEqual([]);
    const other = file([run([rec('a', 20_000, { promptTokens: 19_000 })])]);
    expect(loadWarnings(other)).toEqual([
      "the server counted 19000 prompt tokens per request against the 16256 sent: pass the served model's " +
        'tokenizer.json with --tokenizer for token-exact prompts.',
    ]);
  });

  it('says when there is nothing to report or the run stopped early', () => {
    const none = file([run([rec('x', 20_000, failed)], { aborted: 'interrupted' })]);
    none.meta.aborted = 'interrupted';
    expect(loadWarnings(none)).toEqual([
      'the run stopped early: interrupted.',
      'no request completed inside the measure window: there are no figures.',
      '1 request failed (100.0%): see failures.',
    ]);
  });
});

describe('bench:load, a run stopped early (Ctrl-C)', () => {
  it('one stopped before its window opened measured nothing, and says so without NaN', () => {
    const r = run([rec('in-flight', 9_000)], { windowEndMs: 10_000, aborted: 'interrupted' });
    const f = file([r]);
    expect(f.cells[0]!.summary).toMatchObject({ measured: 0, goodputPerMin: Number.NaN });
    f.meta = { ...f.meta, aborted: 'interrupted', command: 'c', wallS: 12, trials: 1, seed: 1 };
    const md = loadMarkdown(f);
    expect(md).not.toContain('NaN');
    expect(md).toContain('Goodput –/min within the SLO');
    expect(md).toContain('Prompt tokens as the server counted them: none measured.');
  });

  it('is not compared: its window and its paired requests are fewer', () => {
    const full = file([run([rec('a', 20_000), rec('b', 30_000)])]);
    const cut = file([run([rec('a', 20_000)], { windowEndMs: 25_000, aborted: 'interrupted' })]);
    for (const f of [full, cut])
      f.meta = { ...f.meta, workload: 'control', shapes: PUBLISHED_SHAPES, trials: 1, seed: 1 };
    expect(() => compareLoads(full, cut, 100)).toThrow(
      'concurrent@2: a run stopped early (interrupted): not compared',
    );
  });
});

describe('bench:load comparison of two sweeps', () => {
  const cell = (streams: number, runs: LoadRun[], ttft = 500): LoadCell => {
    const rs = runs.map((r) => ({
      ...r,
      records: r.records.map((x) => ({ ...x, firstTokenMs: x.startMs + ttft })),
    }));
    return {
      profile: { kind: 'concurrent', streams, warmupS: 10, measureS: 60, cooldownS: 10 },
      salts: ['s'],
      summary: summarizeLoad(rs, slo, 'control', PUBLISHED_SHAPES),
      runs: rs,
    };
  };
  const sweep = (cells: LoadCell[]): LoadResultsFile => ({
    meta: {
      workload: 'control',
      shapes: PUBLISHED_SHAPES,
      trials: 1,
      seed: 42,
      aborted: null,
    } as unknown as LoadResultsFile['meta'],
    slo,
    cells,
  });
  const reqs = (n: number): RequestRecord[] => Array.from({ length: n }, (_, i) => rec(`r${i}`, 20_000 + i));

  it('compares the profiles both ran with as many runs, says which it left out, and reads peak both ways', () => {
    const a = sweep([
      cell(1, [run(reqs(4))]),
      cell(2, [run(reqs(6))]),
      cell(4, [run(reqs(8))]),
      cell(8, [run(reqs(1))]),
    ]);
    const b = sweep([
      cell(1, [run(reqs(4))], 200),
      cell(2, [run(reqs(12))], 200),
      cell(4, []),
      cell(16, [run(reqs(2))]),
    ]);
    const c = compareLoads(a, b, 200);
    expect([...new Set(c.rows.map((r) => r.profile))]).toEqual([
      'concurrent@1',
      'concurrent@2',
      'concurrent@2 (highest load)',
      // Best among the profiles both ran (a's c=4 has no partner).
      'concurrent@2 vs concurrent@2',
    ]);
    const ttft = c.rows.find((r) => r.profile === 'concurrent@1' && r.metric === 'TTFT p50')!;
    expect(ttft.change).toBeCloseTo(200 / 500 - 1, 9);
    const best = c.rows.find((r) => r.metric === 'best goodput vs best')!;
    expect(best).toMatchObject({ baseline: 6, candidate: 12, change: 2 });
    expect(c.notes).toEqual([
      'concurrent@4: 1 run(s) against 0: not compared',
      'only the baseline ran concurrent@8: not compared',
      'only the candidate ran concurrent@16: not compared',
      'closed loop: the runs complete different requests, so only runs are paired',
      'candidate: concurrent@4: no request completed inside the measure window: there are no figures.',
    ]);
  });

  it('refuses files with no profile in common', () => {
    expect(() =>
      compareLoads(sweep([cell(1, [run(reqs(2))])]), sweep([cell(2, [run(reqs(2))])]), 100),
    ).toThrow('no profile in common with as many runs: concurrent@1 vs concurrent@2');
  });
});

describe('goodput ratio text', () => {
  it('is ∞ only when random has none and the arm some; 0 against 0 is no ratio', () => {
    expect(ratioText({ ratio: 2.718, treatment: 32 })).toBe('2.72×');
    expect(ratioText({ ratio: null, treatment: 31.4 })).toBe('∞');
    expect(ratioText({ ratio: null, treatment: 0 })).toBe('–');
  });
});
