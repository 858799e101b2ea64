import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsPluginServerDef, startGateway, type Gateway } from '../../kong/stand-in/index.js';
import { waitPluginWarm } from '../helpers/plugin-warm-up.js';
import { waitFor } from '../helpers/ports.js';
import { QWEN3_TEMPLATE, QWEN3_TOKENIZER } from '../helpers/qwen3.js';
import { startNamedUpstream, type TestServer } from '../02-integration/kong/test-servers.js';
import { buildPlugin, CHAT_PATH, kongConfigFor, type BuiltPlugin } from '../02-integration/plugin/harness.js';

/**
 * Crash safety of the decision workers (issue #37, item 4) through the real plugin server: under traffic
 * from four connections a worker is terminated as a crash would end it (KINFERENCE_DEBUG_KILL_WORKER and a SIGUSR2). Every
 * request is answered by the pod (none 500), those the dead worker held are routed on load with
 * decision_worker_failed, the worker is replaced and loaded again, and the plugin server itself never restarts.
 */

const MODEL = 'qwen3';
let plugin: BuiltPlugin;
let pod: TestServer;
let gw: Gateway;
let prefix: string;
let stateFile: string;

const pluginConfig = (address: string): Record<string, unknown> => ({
  index: 'memory',
  tokenizer: QWEN3_TOKENIZER,
  chat_template: QWEN3_TEMPLATE,
  model_pods: { [MODEL]: [address] },
  expose_headers: true,
  decision_workers: 2,
  decision_budget_ms: 5000,
});

interface WorkerStats {
  worker: number;
  prepared: number;
  restarts: number;
  loaded: number;
  heapUsedBytes: number | null;
}

interface LoopStats {
  delayMs: { p50: number; p99: number; max: number };
  utilization: number;
  windowMs: number;
  gc: Record<'minor' | 'major' | 'other', { count: number; totalMs: number; maxMs: number }>;
}

async function dump(): Promise<{ decisionWorkers: WorkerStats[] | null; eventLoop: LoopStats }> {
  const seqOf = (): number =>
    existsSync(stateFile) ? (JSON.parse(readFileSync(stateFile, 'utf8')) as { seq: number }).seq : 0;
  const before = seqOf();
  const pid = gw.plugins.get('kinference')?.server.pid;
  if (pid === undefined) throw new Error('the plugin server is not running');
  process.kill(pid, 'SIGUSR2');
  await waitFor('plugin state dump', () => seqOf() > before, 30_000);
  return JSON.parse(readFileSync(stateFile, 'utf8')) as {
    decisionWorkers: WorkerStats[] | null;
    eventLoop: LoopStats;
  };
}

beforeAll(async () => {
  plugin = await buildPlugin();
  pod = await startNamedUpstream('pod');
  prefix = mkdtempSync(join(tmpdir(), 'kinf-workers-'));
  stateFile = join(prefix, 'state.json');
  const config = pluginConfig(`127.0.0.1:${pod.port}`);
  gw = await startGateway({
    kongConfig: kongConfigFor(pod.url, config),
    port: 0,
    pluginServers: [
      jsPluginServerDef('kinference', plugin.dir, prefix, {
        env: { KINFERENCE_DEBUG_STATE: stateFile, KINFERENCE_DEBUG_KILL_WORKER: join(prefix, 'kill') },
      }),
    ],
    logger: () => undefined,
  });
  await waitPluginWarm(gw, config);
}, 240_000);

afterAll(async () => {
  await gw?.close();
  await pod?.close();
  plugin?.cleanup();
  if (prefix) rmSync(prefix, { recursive: true, force: true });
});

describe('decision workers in the real plugin server', () => {
  it('replace a worker killed under traffic; its requests are routed on load, none answered 500', async () => {
    // Set the workers' loads apart from the traffic: dumps until both workers loaded the config.
    await waitFor(
      'both workers loaded',
      async () => (await dump()).decisionWorkers?.every((w) => w.loaded === 1) ?? false,
      180_000,
    );
    const words = (i: number): string =>
      Array.from({ length: 3000 }, (_, k) => `w${(k * 7 + i) % 997}`).join(' ');
    let sent = 0;
    const statuses: number[] = [];
    const send = async (): Promise<void> => {
      const i = sent++;
      const r = await fetch(`${gw.url}${CHAT_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `${i} ${words(i)}` }] }),
      });
      await r.arrayBuffer();
      statuses.push(r.status);
    };
    const connection = async (n: number): Promise<void> => {
      for (let k = 0; k < n; k++) await send();
    };
    const traffic = Promise.all([connection(15), connection(15), connection(15), connection(15)]);
    await waitFor('traffic started', () => sent >= 8, 60_000);
    writeFileSync(join(prefix, 'kill'), '');
    await dump(); // kills worker 0
    await traffic;

    expect(statuses.length).toBe(60);
    expect(statuses.every((s) => s === 200)).toBe(true);
    const reasons = pod.requests.slice(-60).map((r) => String(r.headers['x-kinference-fallback'] ?? 'none'));
    // The index is empty: a prepared request falls back at the lookup (no_pods_in_index) onto model_pods.
    for (const r of reasons) expect(['no_pods_in_index', 'decision_worker_failed']).toContain(r);
    await waitFor(
      'worker 0 replaced and loaded',
      async () => {
        const w = (await dump()).decisionWorkers?.[0];
        return w !== undefined && w.restarts >= 1 && w.loaded === 1;
      },
      180_000,
    );
    // Prepared in the workers, not on the event loop.
    const state = await dump();
    const workers = state.decisionWorkers ?? [];
    // The event loop since the previous dump, over a few requests between two dumps (dumps in quick succession
    // have windows under a millisecond): its delay percentiles ordered (a 1 ms timer: at least ~1 ms),
    // utilization a share, GC pauses tallied by kind.
    await connection(4);
    const loop = (await dump()).eventLoop;
    expect(loop.windowMs).toBeGreaterThan(0);
    expect(loop.utilization).toBeGreaterThan(0);
    expect(loop.utilization).toBeLessThanOrEqual(1);
    expect(loop.delayMs.p50).toBeGreaterThanOrEqual(0.9);
    expect(loop.delayMs.p99).toBeGreaterThanOrEqual(loop.delayMs.p50);
    expect(loop.delayMs.max).toBeGreaterThanOrEqual(loop.delayMs.p99);
    for (const k of ['minor', 'major', 'other'] as const)
      expect(loop.gc[k].maxMs).toBeLessThanOrEqual(loop.gc[k].totalMs);
    expect(workers.reduce((n, w) => n + w.prepared, 0)).toBeGreaterThanOrEqual(55);
    // Each worker reports its own heap (a V8 isolate the process's memoryUsage() does not include): the soak
    // samples them (bench:faults). A worker holds its tokenizer, so its heap is well past an empty isolate's.
    for (const w of workers) expect(w.heapUsedBytes ?? 0, `worker ${w.worker}`).toBeGreaterThan(4 << 20);
    // One process throughout: the plugin server did not restart.
    expect(gw.plugins.get('kinference')?.server.spawns).toBe(1);
  }, 400_000);
});
