// The body fuzz's processes: an emulated pod, the Kong stand-in with the real plugin server; one request.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulatorFleet, type EmulatorFleet } from '../../../emulator/server/fleet.js';
import { parseFleetConfig } from '../../../src/config/fleet-config.js';
import { freeLoopbackPort } from '../../../harness/redis-server.js';
import { waitFor } from '../../../harness/wait-for.js';
import { jsPluginServerDef, startGateway, type Gateway } from '../../../kong/stand-in/index.js';
import { qwen3TokenizerDir } from '../setup.js';
import type { FuzzCase } from './bodies.js';
import { mib } from './process-cpu.js';

export const FUZZ_MODEL = 'Qwen/Qwen3-8B';
const MiB = 1024 * 1024;

export interface MemorySample {
  rssMiB: number;
  heapUsedMiB?: number;
  heapTotalMiB?: number;
  externalMiB?: number;
  arrayBuffersMiB?: number;
}

export interface Answer {
  status: number | 'hang' | 'error';
  ms: number;
}

export function withoutGatewayOwned(c: FuzzCase): FuzzCase {
  const owned = (k: string) => /^(x-data-parallel-rank|x-kinference-.*)$/i.test(k);
  return { ...c, headers: Object.fromEntries(Object.entries(c.headers).filter(([k]) => !owned(k))) };
}

export function send(base: string, c: FuzzCase, timeoutMs: number): Promise<Answer> {
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

export interface Stack {
  fleet: EmulatorFleet;
  podUrl: string;
  gw: Gateway;
  stateFile: string;
  errors: { count: number; first: string[] };
  close(): Promise<void>;
}

export async function startStack(pluginsDir: string, extraEnv: Record<string, string> = {}): Promise<Stack> {
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

export function pluginPid(gw: Gateway): number {
  const pid = gw.plugins.get('kinference')?.server.pid;
  if (pid === undefined) throw new Error('the plugin server is not running');
  return pid;
}

/** The plugin's state dump (SIGUSR2, KINFERENCE_DEBUG_STATE), taken after a full GC. */
export async function stateDump(gw: Gateway, file: string): Promise<Record<string, unknown>> {
  const seqOf = (): number =>
    existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { seq: number }).seq : 0;
  const before = seqOf();
  process.kill(pluginPid(gw), 'SIGUSR2');
  await waitFor('plugin state dump', () => seqOf() > before, 30_000);
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
}

export function sampleFrom(dump: Record<string, unknown>): MemorySample {
  const m = dump.memory as Record<string, number>;
  return {
    rssMiB: mib(m.rss!),
    heapUsedMiB: mib(m.heapUsed!),
    heapTotalMiB: mib(m.heapTotal!),
    externalMiB: mib(m.external!),
    arrayBuffersMiB: mib(m.arrayBuffers!),
  };
}
