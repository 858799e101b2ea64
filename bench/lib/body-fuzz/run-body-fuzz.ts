// runBodyFuzz: seeded bodies through the stand-in + plugin server and straight to a pod, compared, measured.
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulatorFleet, type EmulatorFleet } from '../../../emulator/server/fleet.js';
import { parseFleetConfig } from '../../../src/config/fleet-config.js';
import { freeLoopbackPort } from '../../../harness/redis-server.js';
import { waitFor } from '../../../harness/wait-for.js';
import {
  defaultPluginsDir,
  jsPluginServerDef,
  startGateway,
  type Gateway,
} from '../../../kong/stand-in/index.js';
import { qwen3TokenizerDir } from '../setup.js';
import { BODY_CLASSES, fuzzCase, type BodyClass, type CaseOptions, type FuzzCase } from './bodies.js';

/**
 * The body fuzz (issue #36): seeded chat bodies, good and bad, each sent straight to an emulated vLLM pod and
 * through the Kong stand-in running the real kinference plugin in the real plugin server, which routes to that
 * pod. The gateway must answer every body with the pod's status (no plugin-caused 5xx), never hang, and its
 * plugin server must not crash; its CPU per request and memory (RSS, heap, after a forced GC) are measured.
 */

export interface BodyFuzzOptions {
  bodies: number;
  seed: number;
  /** Directory of the built plugin (default dist/plugins/kinference). */
  pluginsDir?: string;
  /** Cases that are valid bodies, sent first to warm the plugin up (default 20). */
  warmup?: number;
  /** Every class once, in order, before the random cases (the CI spec's coverage). */
  everyClassFirst?: boolean;
  caseOptions?: Partial<Omit<CaseOptions, 'model'>>;
  /** Extra environment of the plugin server (e.g. MALLOC_ARENA_MAX, to tell allocator retention apart). */
  pluginServerEnv?: Record<string, string>;
  /** Per request; longer counts as a hang. */
  timeoutMs?: number;
  onProgress?: (done: number, total: number) => void;
  /** Every case as it was answered, with the plugin server's RSS after it (investigations). */
  onCase?: (
    c: FuzzCase,
    r: { gateway: Answer['status']; direct: Answer['status']; cpuMs: number; rssMiB: number },
  ) => void;
}

export interface MemorySample {
  rssMiB: number;
  heapUsedMiB?: number;
  heapTotalMiB?: number;
  externalMiB?: number;
  arrayBuffersMiB?: number;
}

export interface Mismatch {
  index: number;
  cls: BodyClass;
  gateway: number | 'hang' | 'error';
  direct: number | 'hang' | 'error';
  bytes: number;
}

export interface BodyFuzzReport {
  seed: number;
  bodies: number;
  byClass: Record<string, number>;
  /** Gateway status → count. */
  statuses: Record<string, number>;
  mismatches: Mismatch[];
  hangs: number;
  /** Errors the gateway logged (a lost log phase, a PDK error…): first lines, and how many in all. */
  gatewayErrors: { count: number; first: string[] };
  pluginServerSpawns: number;
  worstCpuMs: { ms: number; index: number; cls: BodyClass; bytes: number };
  worstWallMs: { ms: number; index: number; cls: BodyClass };
  memory: {
    start: MemorySample;
    afterWarmup: MemorySample;
    afterRun: MemorySample;
    /** Highest RSS seen after a case, and the case. */
    peak: MemorySample & { index: number; cls: BodyClass };
    /** After a full GC in the plugin server: what is retained, the rest is heap V8 keeps. */
    afterGc: MemorySample;
  };
  /** What the plugin held at the end (its KINFERENCE_DEBUG_STATE dump). */
  pluginState: Record<string, unknown>;
  durationS: number;
}

export const FUZZ_MODEL = 'Qwen/Qwen3-8B';

const MiB = 1024 * 1024;
const mib = (b: number): number => Math.round((b / MiB) * 10) / 10;

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** CPU time of every thread of the process (ns, from schedstat: the tokenizer's pool threads count too). */
function cpuNsOf(pid: number): number {
  if (!existsSync(`/proc/${pid}`)) throw new Error(`process ${pid} is gone`);
  let ns = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns;
}

export interface Answer {
  status: number | 'hang' | 'error';
  ms: number;
}

function withoutGatewayOwned(c: FuzzCase): FuzzCase {
  const owned = (k: string) => /^(x-data-parallel-rank|x-kinference-.*)$/i.test(k);
  return { ...c, headers: Object.fromEntries(Object.entries(c.headers).filter(([k]) => !owned(k))) };
}

function send(base: string, c: FuzzCase, timeoutMs: number): Promise<Answer> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const url = new URL(base);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: `/v1/chat/completions${c.query}`,
        headers: { 'content-type': 'application/json', ...c.headers, 'content-length': c.body.length },
        timeout: timeoutMs,
      },
      (res) => {
        res.on('data', () => undefined);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0 }));
        res.on('error', () => resolve({ status: 'error', ms: performance.now() - t0 }));
      },
    );
    req.on('timeout', () => {
      req.destroy();
      resolve({ status: 'hang', ms: performance.now() - t0 });
    });
    req.on('error', () => resolve({ status: 'error', ms: performance.now() - t0 }));
    req.end(c.body);
  });
}

interface Stack {
  fleet: EmulatorFleet;
  podUrl: string;
  gw: Gateway;
  stateFile: string;
  errors: { count: number; first: string[] };
  close(): Promise<void>;
}

async function startStack(pluginsDir: string, extraEnv: Record<string, string> = {}): Promise<Stack> {
  const dir = qwen3TokenizerDir();
  const [http, pub, replay] = [await freeLoopbackPort(), await freeLoopbackPort(), await freeLoopbackPort()];
  const address = `127.0.0.1:${http}`;
  const fleetCfg = parseFleetConfig(
    {
      models: {
        [FUZZ_MODEL]: {
          tokenizer: `hf:${join(dir, 'tokenizer.json')}`,
          chat_template: `hf:${join(dir, 'tokenizer_config.json')}`,
          block_size: 16,
        },
      },
      pods: [
        {
          id: 'pod-0',
          model: FUZZ_MODEL,
          address,
          kv_events: `tcp://127.0.0.1:${pub}`,
          kv_events_replay: `tcp://127.0.0.1:${replay}`,
          kv_events_topic: 'kv',
          metrics: `http://${address}/metrics`,
        },
      ],
      emulator: { time_scale: 50, hash_seed: '0' },
    },
    'body-fuzz fleet',
    dir,
  );
  const fleet = await startEmulatorFleet(fleetCfg, { log: () => undefined });
  const podUrl = `http://${address}`;
  const prefix = mkdtempSync(join(tmpdir(), 'kinf-fuzz-'));
  const stateFile = join(prefix, 'state.json');
  const errors = { count: 0, first: [] as string[] };
  let gw: Gateway;
  try {
    await waitFor('pod /health', async () => (await fetch(`${podUrl}/health`)).status === 200, 30_000);
    const m = fleetCfg.models[FUZZ_MODEL]!;
    gw = await startGateway({
      kongConfig: {
        _format_version: '3.0',
        services: [
          {
            name: 'vllm',
            url: podUrl,
            retries: 0,
            read_timeout: 600000,
            routes: [
              {
                name: 'chat',
                paths: ['/v1/chat/completions'],
                strip_path: false,
                response_buffering: false,
                plugins: [
                  {
                    name: 'kinference',
                    config: {
                      // The index is empty (no collector): each request is routed on load to the pod.
                      index: 'memory',
                      tokenizer: m.tokenizer,
                      chat_template: m.chat_template,
                      block_size: 16,
                      model_pods: { [FUZZ_MODEL]: [address] },
                      itl_slo_ms: 100,
                    },
                  },
                ],
              },
            ],
          },
        ],
      },
      port: 0,
      pluginServers: [
        jsPluginServerDef('kinference', pluginsDir, prefix, {
          nodeArgs: ['--expose-gc'],
          env: { ...extraEnv, KINFERENCE_DEBUG_STATE: stateFile },
        }),
      ],
      // A deployment raises nginx's buffer to its largest body (docs/plugin.md).
      clientBodyBufferBytes: 16 * MiB,
      logger: (l, msg) => {
        if (l === 'err' && errors.count++ < 10) errors.first.push(msg.slice(0, 300));
        if (process.env.KINF_FUZZ_LOG) process.stderr.write(`[${l}] ${msg}\n`);
      },
    });
  } catch (e) {
    await fleet.close();
    rmSync(prefix, { recursive: true, force: true });
    throw e;
  }
  return {
    fleet,
    podUrl,
    gw,
    stateFile,
    errors,
    close: async () => {
      await gw.close();
      await fleet.close();
      rmSync(prefix, { recursive: true, force: true });
    },
  };
}

function pluginPid(gw: Gateway): number {
  const pid = gw.plugins.get('kinference')?.server.pid;
  if (pid === undefined) throw new Error('the plugin server is not running');
  return pid;
}

/** The plugin's state dump (SIGUSR2, KINFERENCE_DEBUG_STATE), taken after a full GC. */
async function stateDump(gw: Gateway, file: string): Promise<Record<string, unknown>> {
  const seqOf = (): number =>
    existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { seq: number }).seq : 0;
  const before = seqOf();
  process.kill(pluginPid(gw), 'SIGUSR2');
  await waitFor('plugin state dump', () => seqOf() > before, 30_000);
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
}

function sampleFrom(dump: Record<string, unknown>): MemorySample {
  const m = dump.memory as Record<string, number>;
  return {
    rssMiB: mib(m.rss!),
    heapUsedMiB: mib(m.heapUsed!),
    heapTotalMiB: mib(m.heapTotal!),
    externalMiB: mib(m.external!),
    arrayBuffersMiB: mib(m.arrayBuffers!),
  };
}

export async function runBodyFuzz(options: BodyFuzzOptions): Promise<BodyFuzzReport> {
  const t0 = Date.now();
  const caseOptions: CaseOptions = {
    model: FUZZ_MODEL,
    maxStringBytes: 10 * MiB,
    manyMessages: 100_000,
    maxDepth: 100_000,
    ...options.caseOptions,
  };
  const timeoutMs = options.timeoutMs ?? 120_000;
  const stack = await startStack(options.pluginsDir ?? defaultPluginsDir(), options.pluginServerEnv);
  const { gw } = stack;
  try {
    // The plugin server loads the plugin on its first event: RSS "at start" is after one request.
    const warm = options.warmup ?? 20;
    const first = fuzzCase(options.seed, -1, caseOptions, 'valid');
    await send(gw.url, first, timeoutMs);
    await gw.idle();
    const start: MemorySample = { rssMiB: mib(rssOf(pluginPid(gw))) };
    for (let i = 0; i < warm; i++) {
      const c = fuzzCase(options.seed, -2 - i, caseOptions, 'valid');
      const r = await send(gw.url, c, timeoutMs);
      await gw.idle();
      options.onCase?.(c, {
        gateway: r.status,
        direct: r.status,
        cpuMs: 0,
        rssMiB: mib(rssOf(pluginPid(gw))),
      });
    }
    const afterWarmup: MemorySample = { rssMiB: mib(rssOf(pluginPid(gw))) };

    const report: BodyFuzzReport = {
      seed: options.seed,
      bodies: 0,
      byClass: Object.fromEntries(BODY_CLASSES.map((c) => [c, 0])),
      statuses: {},
      mismatches: [],
      hangs: 0,
      gatewayErrors: stack.errors,
      pluginServerSpawns: 0,
      worstCpuMs: { ms: 0, index: -1, cls: 'valid', bytes: 0 },
      worstWallMs: { ms: 0, index: -1, cls: 'valid' },
      memory: {
        start,
        afterWarmup,
        afterRun: start,
        afterGc: start,
        peak: { ...afterWarmup, index: -1, cls: 'valid' },
      },
      pluginState: {},
      durationS: 0,
    };
    const forced = options.everyClassFirst ? BODY_CLASSES.length : 0;
    const total = forced + options.bodies;
    for (let i = 0; i < total; i++) {
      const c = fuzzCase(options.seed, i, caseOptions, i < forced ? BODY_CLASSES[i] : undefined);
      const pid = pluginPid(gw);
      const cpu0 = cpuNsOf(pid);
      const viaGw = await send(gw.url, c, timeoutMs);
      await gw.idle(); // the log phase's CPU belongs to the request too
      let cpuMs = 0;
      try {
        cpuMs = (cpuNsOf(pid) - cpu0) / 1e6;
      } catch {
        // the plugin server died on this body: counted as a respawn below; wait for the new one
        await gw.pluginServersReady(30_000);
      }
      // The gateway clears client-sent x-data-parallel-rank / x-kinference-* (docs/security.md): the pod
      // answers the request as the gateway forwards it.
      const direct = await send(stack.podUrl, withoutGatewayOwned(c), timeoutMs);
      report.bodies++;
      report.byClass[c.cls] = (report.byClass[c.cls] ?? 0) + 1;
      report.statuses[String(viaGw.status)] = (report.statuses[String(viaGw.status)] ?? 0) + 1;
      if (viaGw.status === 'hang') report.hangs++;
      if (viaGw.status !== direct.status)
        report.mismatches.push({
          index: c.index,
          cls: c.cls,
          gateway: viaGw.status,
          direct: direct.status,
          bytes: c.body.length,
        });
      if (cpuMs > report.worstCpuMs.ms)
        report.worstCpuMs = {
          ms: Math.round(cpuMs * 10) / 10,
          index: c.index,
          cls: c.cls,
          bytes: c.body.length,
        };
      if (viaGw.ms > report.worstWallMs.ms)
        report.worstWallMs = { ms: Math.round(viaGw.ms), index: c.index, cls: c.cls };
      options.onProgress?.(i + 1, total);
      const rssMiB = mib(rssOf(pluginPid(gw)));
      if (rssMiB > report.memory.peak.rssMiB) report.memory.peak = { rssMiB, index: c.index, cls: c.cls };
      options.onCase?.(c, { gateway: viaGw.status, direct: direct.status, cpuMs, rssMiB });
    }
    report.memory.afterRun = { rssMiB: mib(rssOf(pluginPid(gw))) };
    const dump = await stateDump(gw, stack.stateFile);
    report.memory.afterGc = sampleFrom(dump);
    report.pluginState = { pending: dump.pending, routers: dump.routers, logOnceKeys: dump.logOnceKeys };
    report.pluginServerSpawns = gw.plugins.get('kinference')!.server.spawns;
    report.durationS = Math.round((Date.now() - t0) / 100) / 10;
    return report;
  } finally {
    await stack.close();
  }
}
