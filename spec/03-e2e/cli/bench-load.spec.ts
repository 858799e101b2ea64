import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadResultsFile } from '../../../bench/lib/load/report.js';
import { promCounter } from '../../helpers/full-system.js';
import { waitFor } from '../../helpers/ports.js';
import { MODEL, startTestFleet, type TestFleet } from '../../02-integration/emulator/emulator-fleet.js';

const load = fileURLToPath(new URL('../../../dist/bench/load.js', import.meta.url));

/**
 * The built `bench:load` as a user runs it (async: the emulated pods live in this process). `onStderr` sees
 * its stderr as it comes, with the child (to signal it).
 */
function runLoad(
  args: string[],
  onStderr?: (soFar: string, child: ChildProcess) => void,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [load, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      onStderr?.(stderr, child);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Requests a pod ended because their client went away (vllm:request_success_total, reason abort). */
async function abortedRequests(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  let n = 0;
  for (const line of text.split('\n'))
    if (line.startsWith('vllm:request_success_total{') && line.includes('finished_reason="abort"'))
      n += Number(line.slice(line.lastIndexOf(' ') + 1));
  return n;
}

// The load generator alone against emulated vLLM pods (20× time): token-exact prompts as the server counts
// them, GuideLLM's windows and metrics, the comparison table, and failures said plainly.
// 90 s a test: a start of bench:load alone took 20 s and more beside a CPU-heavy job (the runs themselves
// are a few seconds); the tests that run several keep their own 60 s on top of the default.
describe('bench:load against an OpenAI endpoint', { timeout: 90_000 }, () => {
  let fleet: TestFleet;
  let dir: string;
  const url = (i: number): string => `${fleet.pods[i]!.base}/v1/chat/completions`;
  const read = (name: string): LoadResultsFile =>
    JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8')) as LoadResultsFile;
  const common = (name: string): string[] => ['--model', MODEL, '--out-dir', dir, '--name', name];
  const multiturn = ['--workload', 'multiturn', '--shape', 'firstPromptTokens=1000,turns=3'];
  const poisson = ['--rate', '4', '--warmup-s', '0.5', '--measure-s', '4', '--cooldown-s', '0.5'];

  beforeAll(async () => {
    fleet = await startTestFleet(2, { time_scale: 20 });
    dir = mkdtempSync(join(tmpdir(), 'kinf-load-'));
  }, 60_000);
  afterAll(async () => {
    await fleet?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('closed loop, shared-prefix: every prompt the same exact size, prefixes hit, goodput against a measured SLO', async () => {
    const r = await runLoad([
      '--url',
      url(0),
      ...common('sp'),
      '--workload',
      'shared-prefix',
      '--shape',
      'prefixTokens=2000,prefixCount=3',
      '--concurrency',
      '3',
      '--warmup-s',
      '0.5',
      '--measure-s',
      '4',
      '--cooldown-s',
      '0.5',
    ]);
    expect(r.stderr).toMatch(/SLO: TTFT ≤ [\d.]+ s \(measured idle uncached TTFT of a 2,256-token prompt/);
    expect(r.code).toBe(0);
    const f = read('sp');
    expect(f.meta).toMatchObject({ tool: 'bench:load', workload: 'shared-prefix', trials: 1 });
    expect(f.cells[0]!.profile).toMatchObject({ kind: 'concurrent', streams: 3, measureS: 4 });
    const recs = f.cells[0]!.runs[0]!.records.filter((x) => x.status === 'successful');
    expect(recs.length).toBeGreaterThan(10);
    // 2,000 + 256 content tokens plus the chat template's, identical for every request: token-exact.
    expect(new Set(recs.map((x) => x.promptTokens))).toEqual(new Set([recs[0]!.promptTokens]));
    expect(recs[0]!.promptTokens - 2256).toBeGreaterThan(0);
    expect(recs[0]!.promptTokens - 2256).toBeLessThan(20);
    expect(f.cells[0]!.summary.cachedShare).toBeGreaterThan(0.5);
    expect(f.cells[0]!.summary.measured).toBeGreaterThan(0);
    expect(f.cells[0]!.summary.goodputPerMin).toBeGreaterThan(0);
    expect(f.cells[0]!.summary.goodputPerMin).toBeLessThanOrEqual(f.cells[0]!.summary.throughputPerMin);
    expect(f.cells[0]!.summary.metrics.ttft_ms.percentiles.p50).toBeGreaterThan(0);
    expect(r.stdout).toContain('| TTFT (s) |');
    expect(readFileSync(join(dir, 'sp.md'), 'utf8')).toContain('Goodput');
  }, 60_000);

  it('open loop: two runs with one seed pair request by request; salts keep one run off the other’s cache', async () => {
    const [a, b] = await Promise.all([
      runLoad(['--url', url(0), ...common('mt-a'), ...multiturn, ...poisson, '--ttft-slo-ms', '500']),
      runLoad(['--url', url(1), ...common('mt-b'), ...multiturn, ...poisson, '--ttft-slo-ms', '500']),
    ]);
    expect(a.code).toBe(0);
    expect(b.code).toBe(0);
    const [fa, fb] = [read('mt-a'), read('mt-b')];
    // The seed fixes each conversation's prompts; how conversations interleave depends on response timing
    // (docs/testing.md), so the runs pair request by request within each conversation.
    const perConversation = (f: typeof fa): Record<string, string[]> => {
      const out: Record<string, string[]> = {};
      for (const x of f.cells[0]!.runs[0]!.records) (out[x.conversationId] ??= []).push(x.key);
      return out;
    };
    expect(perConversation(fa)).toEqual(perConversation(fb));
    expect(fa.meta.salt).not.toBe(fb.meta.salt);

    // Again on pod 0, same seed: with a fresh salt no first turn finds the earlier run's prompt cached; with
    // the first run's salt the same prompts do hit (the salt is what keeps runs apart).
    const [again, sameSalt] = await Promise.all([
      runLoad(['--url', url(0), ...common('mt-again'), ...multiturn, ...poisson, '--ttft-slo-ms', '500']),
      runLoad([
        '--url',
        url(0),
        ...common('mt-same'),
        ...multiturn,
        ...poisson,
        '--ttft-slo-ms',
        '500',
        '--salt',
        fa.meta.salt,
      ]),
    ]);
    expect(again.code).toBe(0);
    const firsts = read('mt-again').cells[0]!.runs[0]!.records.filter(
      (x) => x.turnIndex === 0 && x.status === 'successful',
    );
    expect(firsts.length).toBeGreaterThan(0);
    expect(firsts.every((x) => x.cachedTokens === 0)).toBe(true);
    expect(sameSalt.code).toBe(0);
    const hits = read('mt-same').cells[0]!.runs[0]!.records.filter(
      (x) => x.turnIndex === 0 && x.cachedTokens > 0,
    );
    expect(hits.length).toBeGreaterThan(0);

    const cmp = await runLoad([
      '--compare',
      join(dir, 'mt-a.json'),
      join(dir, 'mt-b.json'),
      '--out-dir',
      dir,
      '--name',
      'cmp',
    ]);
    expect(cmp.code).toBe(0);
    expect(cmp.stdout).toContain('paired hierarchical bootstrap');
    for (const m of ['TTFT p50', 'TTFT p95', 'TTFT mean', 'ITL p50', 'E2E p50', 'goodput'])
      expect(cmp.stdout).toMatch(new RegExp(`\\| ${m} \\| [\\d.]+`));
    expect(cmp.stdout).not.toContain('Note:');
    expect(readFileSync(join(dir, 'cmp.md'), 'utf8')).toBe(cmp.stdout.split('\n\nwrote')[0] + '\n');

    // Runs of different shapes are not compared.
    const bad = await runLoad(['--compare', join(dir, 'mt-a.json'), join(dir, 'sp.json')]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/different workloads: multiturn vs shared-prefix/);
  }, 120_000);

  it('a concurrency sweep: one file per side, goodput at the highest load and best against best compared', async () => {
    const sweep = (
      i: number,
      name: string,
    ): Promise<{ code: number | null; stdout: string; stderr: string }> =>
      runLoad([
        '--url',
        url(i),
        ...common(name),
        '--workload',
        'control',
        '--shape',
        'promptTokens=1000,outputTokens=64',
        '--concurrency',
        '1,12',
        '--warmup-s',
        '0.5',
        '--measure-s',
        '2',
        '--cooldown-s',
        '0.5',
        '--ttft-slo-ms',
        '500',
      ]);
    const [a, b] = await Promise.all([sweep(0, 'sweep-a'), sweep(1, 'sweep-b')]);
    expect(a.code).toBe(0);
    expect(b.code).toBe(0);
    const f = read('sweep-a');
    expect(f.cells.map((c) => c.profile.kind === 'concurrent' && c.profile.streams)).toEqual([1, 12]);
    // Twelve streams share the run's end-of-run signal: no listener-leak warning for it.
    for (const r of [a, b]) expect(r.stderr).not.toContain('MaxListenersExceededWarning');
    // Each profile has its own salt: no prompt finds another's cached, not even one block.
    expect(new Set(f.cells.map((c) => c.salts[0])).size).toBe(2);
    expect(f.cells.flatMap((c) => c.runs[0]!.records).every((x) => x.cachedTokens === 0)).toBe(true);
    expect(a.stdout).toContain('### Goodput by profile');
    const cmp = await runLoad(['--compare', join(dir, 'sweep-a.json'), join(dir, 'sweep-b.json')]);
    expect(cmp.code).toBe(0);
    for (const row of [
      /\| concurrent@1 \| TTFT p50 \|/,
      /\| concurrent@12 \| goodput \|/,
      /\| concurrent@12 \(highest load\) \| goodput at peak load \| [\d.]+\/min/,
      /\| concurrent@\d+ vs concurrent@\d+ \| best goodput vs best \| [\d.]+\/min/,
    ])
      expect(cmp.stdout).toMatch(row);
    expect(cmp.stdout).toContain(
      'closed loop: the runs complete different requests, so only runs are paired',
    );
  }, 60_000);

  it('a server that refuses every request stops the run with its answer, not six minutes of errors', async () => {
    const r = await runLoad([
      '--url',
      url(0),
      '--model',
      'no-such-model',
      '--out-dir',
      dir,
      '--workload',
      'control',
      '--shape',
      'promptTokens=500',
      '--concurrency',
      '2',
      '--ttft-slo-ms',
      '1000',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the first \d+ requests failed: HTTP 404: .*no-such-model/);
  });

  it('a sweep whose later profile fails keeps the profiles measured before it', async () => {
    // A gate in front of pod 0. The first profile has one stream, so one request at a time; the second has
    // two: from the moment two are in flight, the gate cuts those and answers 503 to everything after.
    let failing = false;
    const inFlight = new Set<ServerResponse>();
    const pod = new URL(fleet.pods[0]!.base);
    const gate = createServer((req, res) => {
      if (!failing && inFlight.size >= 1) {
        failing = true;
        for (const other of inFlight) other.destroy();
      }
      if (failing) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"down for maintenance"}}');
        return;
      }
      inFlight.add(res);
      res.on('finish', () => inFlight.delete(res));
      res.on('close', () => inFlight.delete(res));
      const up = request(
        { host: pod.hostname, port: pod.port, path: req.url, method: req.method, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => gate.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (gate.address() as AddressInfo).port;
      const r = await runLoad([
        '--url',
        `http://127.0.0.1:${port}/v1/chat/completions`,
        ...common('sweep-cut'),
        '--workload',
        'control',
        '--shape',
        'promptTokens=500,outputTokens=16',
        '--concurrency',
        '1,2',
        '--warmup-s',
        '0.2',
        '--measure-s',
        '1',
        '--cooldown-s',
        '0.2',
        '--ttft-slo-ms',
        '1000',
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/concurrent@2 failed: the first \d+ requests failed: HTTP 503/);
      const f = read('sweep-cut');
      expect(f.cells.map((c) => c.profile.kind === 'concurrent' && c.profile.streams)).toEqual([1]);
      expect(f.cells[0]!.summary.measured).toBeGreaterThan(0);
      expect(f.meta.aborted).toMatch(/concurrent@2 failed/);
    } finally {
      await new Promise<void>((r) => gate.close(() => r()));
    }
  }, 60_000);

  it('Ctrl-C stops sending, waits for the requests in flight and still writes what it measured', async () => {
    const served = (): Promise<number> => promCounter(fleet.pods[1]!.base, 'vllm:request_success_total');
    const before = await served();
    let signalled = false;
    const r = await runLoad(
      [
        '--url',
        url(1),
        ...common('interrupted'),
        '--workload',
        'control',
        '--shape',
        'promptTokens=2000',
        '--concurrency',
        '2',
        '--warmup-s',
        '0',
        '--measure-s',
        '120',
        '--cooldown-s',
        '0',
        '--ttft-slo-ms',
        '1000',
      ],
      (err, child) => {
        if (signalled || !err.includes('SLO:')) return;
        signalled = true;
        // Once the pod has served two of the run's requests, as a user watching the progress would.
        void waitFor('two requests served', async () => (await served()) >= before + 2, 20_000, 100)
          .catch(() => undefined) // then the count below says so
          .then(() => child.kill('SIGINT'));
      },
    );
    expect(signalled).toBe(true);
    expect(r.code).toBe(130);
    expect(r.stderr).toContain('interrupted: waiting for the requests in flight');
    const f = read('interrupted');
    expect(f.meta.aborted).toBe('interrupted');
    expect(f.cells[0]!.summary.measured).toBeGreaterThanOrEqual(2);
    expect(f.cells[0]!.runs[0]!.records.every((x) => x.status === 'successful')).toBe(true);
    expect(r.stdout).toContain('**Warning:** the run stopped early: interrupted.');
    // The window ends where sending stopped, not 120 s in: the rates are of what ran.
    const stopped = f.cells[0]!.runs[0]!;
    expect(stopped.windowEndMs).toBeLessThan(60_000);
    expect(stopped.windowEndMs).toBeGreaterThanOrEqual(Math.max(...stopped.records.map((x) => x.startMs)));
    const done = stopped.records.filter((x) => x.endMs! <= stopped.windowEndMs).length;
    expect(f.cells[0]!.summary.throughputPerMin).toBeCloseTo((done * 60_000) / stopped.windowEndMs, 6);
  }, 60_000);

  it('cancels the requests still running when the run ends, as GuideLLM does, instead of waiting for them', async () => {
    const abortedBefore = await abortedRequests(fleet.pods[1]!.base);
    const r = await runLoad([
      '--url',
      url(1),
      ...common('cancelled'),
      '--workload',
      'control',
      // Each answer takes ~18 s at 20× (8,000 tokens × 43 ms / 20); the run lasts 2 s.
      '--shape',
      'promptTokens=500,outputTokens=8000',
      '--concurrency',
      '2',
      '--warmup-s',
      '0',
      '--measure-s',
      '2',
      '--cooldown-s',
      '0',
      '--ttft-slo-ms',
      '1000',
    ]);
    expect(r.code).toBe(1); // nothing completed inside the window: no figures, and it says so
    const f = read('cancelled');
    expect(f.cells[0]!.summary).toMatchObject({ incomplete: 2, errored: 0, measured: 0, errors: {} });
    // The pod stopped generating them: vLLM aborts a request whose client went away. Both ended so, not
    // with their 8,000 tokens (a wall-time bound said this before, and a loaded machine broke it).
    await waitFor(
      'the pod idle',
      async () => (await promCounter(fleet.pods[1]!.base, 'vllm:num_requests_running')) === 0,
      5000,
      100,
    );
    expect((await abortedRequests(fleet.pods[1]!.base)) - abortedBefore).toBe(2);
  }, 60_000);

  it('without a measured TTFT bound, an unreachable endpoint fails at once, naming the error', async () => {
    const r = await runLoad([
      '--url',
      'http://127.0.0.1:1/v1/chat/completions',
      ...common('x'),
      '--workload',
      'control',
      '--rate',
      '1',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/measuring the idle TTFT for the SLO: ECONNREFUSED/);
  });

  it('records neither header values nor URL credentials, whichever way they were given', async () => {
    const r = await runLoad([
      '--url=http://alice:pa55word@127.0.0.1:1/v1/chat/completions',
      ...common('secrets'),
      '--header=Authorization: Bearer t0ken',
      '--header',
      'X-Api-Key: k3y',
      '--workload',
      'control',
      '--shape',
      'promptTokens=100',
      ...['--rate', '4', '--warmup-s', '0', '--measure-s', '1', '--cooldown-s', '0', '--fail-fast', '100'],
      '--ttft-slo-ms',
      '1000',
    ]);
    expect(r.code).toBe(1);
    const written = ['secrets.json', 'secrets.md'].map((x) => readFileSync(join(dir, x), 'utf8'));
    expect(read('secrets').meta.command).toContain(
      `--url=http://127.0.0.1:1/v1/chat/completions --model ${MODEL} --out-dir`,
    );
    expect(read('secrets').meta.command).toContain("'--header=Authorization: …' --header 'X-Api-Key: …'");
    for (const text of [r.stdout, r.stderr, ...written]) expect(text).not.toMatch(/pa55word|t0ken|k3y|alice/);
  });

  it('--compare names a file it cannot read or that is not results, without a stack trace', async () => {
    const md = join(dir, 'notes.md');
    writeFileSync(md, '## not JSON\n');
    for (const [file, why] of [
      [join(dir, 'missing.json'), 'ENOENT'],
      [md, 'is not valid JSON'],
    ] as const) {
      const r = await runLoad(['--compare', file, file]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`bench:load: ${file}: `);
      expect(r.stderr).toContain(why);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  });

  // One bench:load start per test, each with the whole budget.
  const usage = (...extra: string[]) =>
    runLoad(['--url', url(0), '--model', MODEL, '--workload', 'control', '--rate', '1', ...extra]);
  it('usage error: both --rate and --concurrency (exit 2)', async () => {
    const both = await usage('--concurrency', '2');
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give exactly one of --rate (open loop) and --concurrency (closed loop)');
  });
  it('usage error: a --shape key the workload does not have (exit 2)', async () => {
    const shape = await usage('--shape', 'turns=3');
    expect(shape.code).toBe(2);
    expect(shape.stderr).toContain('--shape turns=3: control has promptTokens=16256, outputTokens=256');
  });
  // A tokenizer that cannot be read or is not one: the option named, no stack trace.
  it.each([
    ['none.json', 'ENOENT'],
    ['../../../package.json', 'not a HF tokenizer.json'],
  ])('usage error: --tokenizer %s (exit 2, %s)', async (name, why) => {
    const file = name === 'none.json' ? join(dir, name) : fileURLToPath(new URL(name, import.meta.url));
    const tok = await usage('--tokenizer', file);
    expect(tok.code).toBe(2);
    expect(tok.stderr).toContain(`bench:load: --tokenizer ${file}: `);
    expect(tok.stderr).toContain(why);
    expect(tok.stderr).not.toMatch(/\n\s+at /);
  });
});
