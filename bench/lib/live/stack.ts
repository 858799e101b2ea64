// The live fleet on loopback: Redis, emulated pods, collector, Kong stand-in with the plugin.
import { spawn, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { createKvIndex } from '../../../src/index/index.js';
import { listenFailureReason } from '../../../src/util/listen-failure.js';
import { freeLoopbackPort, startRedisServer, type RedisServer } from '../../../harness/redis-server.js';
import { untilRoutesWithTokenizer } from '../../../harness/plugin-warm-up.js';
import type { ModelSetup } from '../setup.js';

/** The whole live fleet on loopback: Redis, N emulated pods, the collector, the Kong stand-in with the plugin. */
export interface LiveStack {
  pods: { id: string; host: string; port: number }[];
  gateway: { host: string; port: number };
  /** Every Kong node (`gateways` option; the first is `gateway`), each with its own plugin server. */
  gateways: { host: string; port: number }[];
  /** Path of the route whose plugin has admission control (`admission` option); the same gateway. */
  sloPath: string | null;
  /** Per pod id, the gateway path of a route straight to that pod (`podRoutes` option), else null. */
  podPaths: Record<string, string> | null;
  redis: { url: string };
  /** The Redis key prefix the collector and the plugin share. */
  keyPrefix: string;
  dir: string;
  /** The gateway's file-log (Kong's bundled plugin, global): one kong.log.serialize() JSON line per request. */
  accessLog: string;
  /**
   * Restarts the collector with no calibration history and clears the calibration it wrote, so the cell
   * starts where its discrete-event twin does (the path probes' solo prefills would otherwise calibrate
   * the pods before the cell).
   */
  restartCollector(): Promise<void>;
  stop(): Promise<void>;
}

export interface LiveStackOptions {
  pods: number;
  profile: string;
  kvCapacityTokens: number;
  timeScale: number;
  seed: number;
  /** Collector scrape interval in virtual ms (divided by the time scale). */
  scrapeIntervalMs: number;
  model: ModelSetup;
  /** Path of bin/kinference.js (runs the built CLI). */
  cli: string;
  /** Export the plugin's decision spans here (OTLP/HTTP traces endpoint). */
  otlpEndpoint?: string;
  /** Use this Redis instead of starting a private redis-server (keys go under a run-specific prefix). */
  redisUrl?: string;
  /** Also serve a route `/slo/v1/chat/completions` whose plugin has these admission-control settings. */
  admission?: { itl_slo_ms: number; shed_ttft_slo_ms: number } & Record<string, unknown>;
  /** Append the children's stderr (their JSON logs) to this file instead of this process's stderr. */
  childLog?: string;
  /** More settings for the kinference route's plugin (e.g. a policies section). */
  pluginExtra?: Record<string, unknown>;
  /** More settings for the emulated pods (the fleet file's emulator section). */
  emulatorExtra?: Record<string, unknown>;
  /** Kong nodes to start on the same declarative config, each with its own plugin server (default 1). */
  gateways?: number;
  /** Kong consumers (decK form, their own plugins included), given the stack's Redis (host and port). */
  consumers?: (redis: { host: string; port: number }) => Record<string, unknown>[];
  /** Plugins before kinference on the chat route, and on the pod routes (e.g. key-auth). */
  routePlugins?: Record<string, unknown>[];
  /**
   * Also serve a route per pod (`/pods/<id>`, stripped) straight to it, with `routePlugins`: a client that
   * picks the pod itself (the random arms) goes through the same gateway and plugins as the others.
   */
  podRoutes?: boolean;
}

function get(host: string, port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, method: 'GET', timeout: 1000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

async function until(
  what: string,
  ok: () => Promise<boolean>,
  timeoutMs: number,
  procs: ChildProcess[],
): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    if (await ok()) return;
    const dead = procs.find((p) => p.exitCode !== null);
    if (dead) throw new Error(`${what}: ${dead.spawnargs.join(' ')} exited with ${dead.exitCode}`);
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not ready after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The path of the warm-up route: a plugin instance with the chat route's tokenizer, proxying to an echo. */
const WARM_UP_PATH = '/kinference-warm-up';

/**
 * The warm-up route's upstream: answers each request with the `x-kinference-fallback` header the plugin set
 * on it (expose_headers), so the stack can tell from outside the gateway when the plugin routes with its
 * tokenizer. No pod sees a warm-up request.
 */
async function startFallbackEcho(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const fallback = req.headers['x-kinference-fallback'];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ fallback: typeof fallback === 'string' ? fallback : null }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return server;
}

/** The fallback of one warm-up request through the gateway (`failed:<status>` when it did not reach the echo). */
async function warmUpFallback(gatewayPort: number): Promise<string | undefined> {
  // A model no route serves: the plugin tokenizes it, finds no pod and proxies to the echo.
  const body = JSON.stringify({
    model: 'warm-up',
    messages: [{ role: 'user', content: 'warm up' }],
    max_tokens: 1,
  });
  const r = await fetch(`http://127.0.0.1:${gatewayPort}${WARM_UP_PATH}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const text = await r.text();
  if (r.status !== 200) return `failed:${r.status}`;
  return (JSON.parse(text) as { fallback: string | null }).fallback ?? undefined;
}

/** A process of the stack could not listen on the port picked for it: another process took it meanwhile. */
class PortTakenError extends Error {}
/** What the CLI says then (src/util/listen-failure.ts). */
const PORT_TAKEN = listenFailureReason({ code: 'EADDRINUSE' })!;

/**
 * Starts the stack, again with fresh ports (up to 3 times) when a process finds its port taken: ports are
 * picked free before the processes bind them, and another test or stack may bind one in between.
 */
export async function startLiveStack(o: LiveStackOptions): Promise<LiveStack> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startLiveStackOnce(o);
    } catch (e) {
      if (!(e instanceof PortTakenError) || attempt >= 3) throw e;
    }
  }
}

/** `n` distinct free loopback ports (each picked free alone could repeat). */
async function freePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freeLoopbackPort());
  return [...ports];
}

async function startLiveStackOnce(o: LiveStackOptions): Promise<LiveStack> {
  const dir = mkdtempSync(join(tmpdir(), 'kinf-live-'));
  const own: RedisServer | null = o.redisUrl ? null : await startRedisServer();
  const redis = { url: o.redisUrl ?? own!.url };
  const keyPrefix = o.redisUrl ? `kinf-live-${process.pid}` : 'kinf';
  const procs: ChildProcess[] = [];
  const echo = await startFallbackEcho();
  const stopProcess = (p: ChildProcess): Promise<void> =>
    new Promise<void>((resolve) => {
      if (p.exitCode !== null || p.signalCode !== null) return resolve();
      const t = setTimeout(() => p.kill('SIGKILL'), 5000);
      p.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      p.kill('SIGTERM');
    });
  const stop = async (): Promise<void> => {
    await Promise.all(procs.map(stopProcess));
    await new Promise<void>((resolve) => echo.close(() => resolve()));
    await own?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const nodes = o.gateways ?? 1;
    const ports = await freePorts(2 * o.pods + 1 + nodes);
    const pods: { id: string; host: string; port: number; kv: number }[] = [];
    for (let i = 0; i < o.pods; i++)
      pods.push({ id: `pod-${i}`, host: '127.0.0.1', port: ports[2 * i]!, kv: ports[2 * i + 1]! });
    const [collectorPort, ...gatewayPorts] = ports.slice(2 * o.pods) as [number, ...number[]];
    const fleet = {
      redis_url: redis.url,
      redis_key_prefix: keyPrefix,
      models: {
        [o.model.model]: {
          tokenizer: o.model.tokenizerSpec,
          chat_template: o.model.templateSpec,
          block_size: 16,
        },
      },
      pods: pods.map((p) => ({
        id: p.id,
        model: o.model.model,
        address: `${p.host}:${p.port}`,
        kv_events: `tcp://${p.host}:${p.kv}`,
        metrics: `http://${p.host}:${p.port}/metrics`,
      })),
      collector: {
        listen: `127.0.0.1:${collectorPort}`,
        scrape_interval_ms: Math.max(50, Math.round(o.scrapeIntervalMs / o.timeScale)),
      },
      emulator: {
        profile: o.profile,
        time_scale: o.timeScale,
        kv_capacity_tokens: o.kvCapacityTokens,
        seed: o.seed,
        ...o.emulatorExtra,
      },
    };
    const pluginConfig = {
      redis_url: redis.url,
      redis_key_prefix: keyPrefix,
      index: 'redis',
      ...(o.otlpEndpoint ? { otlp_endpoint: o.otlpEndpoint } : {}),
      tokenizer: o.model.tokenizerSpec,
      chat_template: o.model.templateSpec,
      block_size: 16,
      model_pods: { [o.model.model]: pods.map((p) => `${p.host}:${p.port}`) },
      ...o.pluginExtra,
    };
    // Same tokenizer and template (the plugin server loads them once per spec), no pods, no policies:
    // it tells when the chat route's instances route with their tokenizer, and touches nothing they use.
    const {
      otlp_endpoint: _otlp,
      policies: _policies,
      ...warmUpBase
    } = pluginConfig as Record<string, unknown>;
    const warmUpConfig = { ...warmUpBase, index: 'memory', expose_headers: true };
    const accessLog = join(dir, 'access.log');
    const redisAddr = new URL(redis.url);
    const podRoutes = o.podRoutes
      ? pods.map((p) => ({
          name: `pod-${p.id}`,
          url: `http://${p.host}:${p.port}`,
          retries: 0,
          read_timeout: 600000,
          routes: [
            {
              name: `pod-${p.id}`,
              paths: [`/pods/${p.id}`],
              methods: ['POST'],
              strip_path: true,
              response_buffering: false,
              plugins: o.routePlugins ?? [],
            },
          ],
        }))
      : [];
    const kong = {
      _format_version: '3.0',
      ...(o.consumers
        ? { consumers: o.consumers({ host: redisAddr.hostname, port: Number(redisAddr.port || 6379) }) }
        : {}),
      // Which pod served each request, as a Kong operator would find out: file-log's `tries`.
      plugins: [{ name: 'file-log', config: { path: accessLog } }],
      services: [
        {
          name: 'vllm',
          url: `http://${pods[0]!.host}:${pods[0]!.port}`,
          retries: 0,
          read_timeout: 600000,
          routes: [
            {
              name: 'chat',
              paths: ['/v1/chat/completions'],
              methods: ['POST'],
              strip_path: false,
              response_buffering: false,
              plugins: [...(o.routePlugins ?? []), { name: 'kinference', config: pluginConfig }],
            },
            // Same plugin, its own instance (Kong keys instances by config): admission control on.
            ...(o.admission
              ? [
                  {
                    name: 'chat-slo',
                    paths: ['/slo'],
                    methods: ['POST'],
                    strip_path: true,
                    response_buffering: false,
                    plugins: [
                      ...(o.routePlugins ?? []),
                      { name: 'kinference', config: { ...pluginConfig, ...o.admission } },
                    ],
                  },
                ]
              : []),
          ],
        },
        ...podRoutes,
        {
          name: 'kinference-warm-up',
          url: `http://127.0.0.1:${(echo.address() as AddressInfo).port}`,
          retries: 0,
          routes: [
            {
              name: 'kinference-warm-up',
              paths: [WARM_UP_PATH],
              methods: ['POST'],
              strip_path: true,
              plugins: [{ name: 'kinference', config: warmUpConfig }],
            },
          ],
        },
      ],
    };
    const fleetPath = join(dir, 'fleet.yaml');
    const kongPath = join(dir, 'kong.yaml');
    writeFileSync(fleetPath, stringify(fleet));
    writeFileSync(kongPath, stringify(kong));
    let portTaken = false;
    const run = (args: string[]): ChildProcess => {
      const p = spawn(process.execPath, [o.cli, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
      p.stderr!.on('data', (d: Buffer) => {
        if (o.childLog !== undefined) appendFileSync(o.childLog, d);
        else process.stderr.write(d);
        if (d.toString('utf8').includes(PORT_TAKEN)) portTaken = true;
      });
      procs.push(p);
      return p;
    };
    const started = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
      try {
        await until(what, ok, 60_000, procs);
      } catch (e) {
        // Its stderr may still be on the way when the exit is seen.
        await new Promise((r) => setTimeout(r, 100));
        throw portTaken ? new PortTakenError(`${what}: a port was taken before it could listen`) : e;
      }
    };
    run(['emulator', '--config', fleetPath]);
    await started('emulator', async () =>
      (await Promise.all(pods.map((p) => get(p.host, p.port, '/health')))).every((s) => s === 200),
    );
    const startCollector = async (): Promise<ChildProcess> => {
      const p = run(['collector', '--config', fleetPath]);
      await started('collector', async () => (await get('127.0.0.1', collectorPort, '/healthz')) === 200);
      return p;
    };
    let collector = await startCollector();
    const restartCollector = async (): Promise<void> => {
      await stopProcess(collector);
      procs.splice(procs.indexOf(collector), 1);
      const index = createKvIndex({ kind: 'redis', url: redis.url, keyPrefix });
      try {
        for (const p of pods)
          await index.upsertPodState({ model: o.model.model, podId: p.id }, { calibration: null });
      } finally {
        await index.close();
      }
      collector = await startCollector();
    };
    // Each node its own prefix (its plugin server's socket lives there), one access log for all of them.
    // One node at a time until it listens: eight plugin servers booting at once on a loaded 2-core host
    // missed the stand-in's 20 s wait for their sockets. Their tokenizers then load side by side.
    for (const [i, port] of gatewayPorts.entries()) {
      const prefix = i === 0 ? dir : join(dir, `node-${i}`);
      mkdirSync(prefix, { recursive: true });
      run(['gateway', '--kong-config', kongPath, '--listen', `127.0.0.1:${port}`, '--prefix', prefix]);
      // Any HTTP answer means the proxy listens (a GET on the POST-only route is 404).
      await started('gateway', async () => (await get('127.0.0.1', port, '/')) > 0);
    }
    for (const port of gatewayPorts) {
      // Until its tokenizer has loaded (in the background), the plugin routes on load (tokenizer_loading): a
      // cell started before would send its first requests, follow-ups included, without cache-aware routing.
      await untilRoutesWithTokenizer(() => warmUpFallback(port), 180_000, 100);
    }
    const gateways = gatewayPorts.map((port) => ({ host: '127.0.0.1', port }));
    return {
      pods: pods.map(({ id, host, port }) => ({ id, host, port })),
      gateway: gateways[0]!,
      gateways,
      sloPath: o.admission ? '/slo/v1/chat/completions' : null,
      podPaths: o.podRoutes
        ? Object.fromEntries(pods.map((p) => [p.id, `/pods/${p.id}/v1/chat/completions`]))
        : null,
      redis,
      keyPrefix,
      dir,
      accessLog,
      restartCollector,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** POST /reset_prefix_cache on every pod (vLLM answers 200 once no request holds blocks). */
export async function resetPrefixCaches(stack: LiveStack): Promise<void> {
  for (const p of stack.pods) await resetPodPrefixCache(p);
}

/**
 * vLLM's POST /reset_prefix_cache on one pod, retried while it is busy (up to 20 s), then one 1-token
 * completion: vLLM publishes AllBlocksCleared with its next step, not at the reset, so an idle pod's index
 * would keep the cleared blocks until its next request. The prompt is shorter than a block: it stores none.
 */
export async function resetPodPrefixCache(p: { host: string; port: number }): Promise<void> {
  await resetOnly(p);
  const models = (await (await fetch(`http://${p.host}:${p.port}/v1/models`)).json()) as {
    data: { id: string }[];
  };
  const r = await fetch(`http://${p.host}:${p.port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: models.data[0]!.id, prompt: 'x', max_tokens: 1 }),
  });
  await r.arrayBuffer();
  if (!r.ok) throw new Error(`POST /v1/completions on ${p.host}:${p.port} after a reset: HTTP ${r.status}`);
}

async function resetOnly(p: { host: string; port: number }): Promise<void> {
  let status = 0;
  for (let i = 0; i < 100; i++) {
    status = await new Promise<number>((resolve) => {
      const req = request(
        { host: p.host, port: p.port, path: '/reset_prefix_cache', method: 'POST' },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', () => resolve(0));
      req.end();
    });
    if (status === 200) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`POST /reset_prefix_cache on ${p.host}:${p.port}: HTTP ${status} for 20 s`);
}

/**
 * The pod each gateway request went to, by Kong request id, from the stack's file-log (the last try's
 * address). Waits up to `waitMs` for the ids it is asked about: the log phase runs after the response.
 */
export async function podsServed(
  stack: Pick<LiveStack, 'accessLog' | 'pods'>,
  requestIds: readonly string[],
  waitMs = 5000,
): Promise<Map<string, string>> {
  const byAddr = new Map(stack.pods.map((p) => [`${p.host}:${p.port}`, p.id]));
  const deadline = Date.now() + waitMs;
  for (;;) {
    const out = new Map<string, string>();
    const text = existsSync(stack.accessLog) ? readFileSync(stack.accessLog, 'utf8') : '';
    for (const line of text.split('\n')) {
      if (!line) continue;
      const e = JSON.parse(line) as { request: { id: string }; tries?: { ip: string; port: number }[] };
      const last = e.tries?.at(-1);
      const pod = last ? byAddr.get(`${last.ip}:${last.port}`) : undefined;
      if (pod) out.set(e.request.id, pod);
    }
    if (requestIds.every((id) => out.has(id)) || Date.now() > deadline) return out;
    await new Promise((r) => setTimeout(r, 100));
  }
}
