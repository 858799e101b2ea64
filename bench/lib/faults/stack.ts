// The fault bench's stack: Redis, one process per emulated pod, the collector, the stand-in child; faults.
import { spawn, fork, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { freeLoopbackPort, startRedisServer, type RedisServer } from '../../../harness/redis-server.js';
import { defaultPluginsDir, packageRoot } from '../../../kong/stand-in/index.js';
import type { GatewayMessage, GatewayReply, GatewayStats } from './gateway-ipc.js';

/**
 * Every part a production gateway has, as its own process, so that each can fail alone: a private
 * redis-server (DEBUG enabled, for the slow-Redis fault), `kinference emulator --pod <id>` per pod,
 * `kinference collector`, and the Kong stand-in (gateway-child.ts) with the real plugin server under it.
 * Children are SIGKILLed when this process exits on any path (registerCleanup).
 */

export interface FaultStackOptions {
  pods: number;
  /** Emulator time scale (10: ten times faster than the profile). */
  timeScale: number;
  kvCapacityTokens: number;
  model: { name: string; tokenizerSpec: string; templateSpec: string };
  /**
   * Plugin bundle directory (default dist/plugins/kinference); a promise lets a bundle still being built be
   * awaited only when the gateway starts.
   */
  pluginsDir?: string | Promise<string>;
  /** Children's stderr goes here (appended); default: dropped unless KINF_FAULTS_LOG is set. */
  childLog?: string;
  /** Plugin config fields merged over the stack's (e.g. redis_timeout_ms). */
  pluginExtra?: Record<string, unknown>;
  scrapeIntervalMs?: number;
}

export interface PodProc {
  id: string;
  host: string;
  port: number;
  kv: number;
  /** The engine's replay ROUTER (vLLM's replay_endpoint): what the collector rebuilds a lost pod from. */
  replay: number;
}

/**
 * How to run the product CLI: the built one (the bench; specs too when `npm test` has built it: five tsx
 * compiles of the whole CLI take a minute on a loaded 2-core machine), else the sources through tsx.
 */
function cliArgv(): string[] {
  const root = packageRoot();
  const built = join(root, 'dist', 'cli', 'main.js');
  return import.meta.url.endsWith('.ts') && (process.env.KINF_FAULTS_TSX || !existsSync(built))
    ? ['--import', 'tsx', join(root, 'cli', 'main.ts')]
    : [join(root, 'bin', 'kinference.js')];
}

/** A process start under load (tsx, a tokenizer load): not what anything here measures. */
const START_MS = 180_000;

function httpStatus(host: string, port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, method: 'GET', timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

function httpText(host: string, port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, method: 'GET', timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: timeout`)));
    req.end();
  });
}

/** Polls `ok` until true; fails early when `proc` exits, and names the hang after `timeoutMs`. */
async function until(what: string, ok: () => Promise<boolean>, timeoutMs: number, proc?: ChildProcess) {
  const t0 = Date.now();
  for (;;) {
    if (await ok()) return;
    if (proc && (proc.exitCode !== null || proc.signalCode !== null))
      throw new Error(`${what}: ${proc.spawnargs.join(' ')} exited (${proc.exitCode ?? proc.signalCode})`);
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not ready after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function stopChild(p: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  return new Promise((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve();
    const t = setTimeout(() => p.kill('SIGKILL'), 5000);
    p.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
    p.kill(signal);
  });
}

const live = new Set<ChildProcess>();
/** The stacks' redis-servers (started by the harness, not children here): killed on exit too. */
const redisPids = new Set<number>();
const gatewayChildren = new WeakSet<ChildProcess>();
let cleanupRegistered = false;
/** On any exit of this process (error, signal), no child is left behind. */
function registerCleanup(): void {
  if (cleanupRegistered) return;
  cleanupRegistered = true;
  process.on('exit', () => {
    for (const p of live)
      if (p.exitCode === null && p.signalCode === null)
        // The stand-in child ends its plugin server on SIGTERM; SIGKILL would leave that server behind.
        p.kill(gatewayChildren.has(p) ? 'SIGTERM' : 'SIGKILL');
    for (const pid of redisPids)
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
  });
}

export class FaultStack {
  readonly dir: string;
  readonly pods: PodProc[] = [];
  readonly keyPrefix = 'kinf';
  gatewayUrl = '';
  #redis!: RedisServer;
  #redisPid = 0;
  #podProcs = new Map<string, ChildProcess>();
  #collector: ChildProcess | null = null;
  #collectorPort = 0;
  #gateway: ChildProcess | null = null;
  #gatewayPort = 0;
  #fleetPath = '';
  #ipcId = 1;
  #waiting = new Map<number, (r: GatewayReply) => void>();
  #slow: { stop: () => Promise<void> } | null = null;

  private constructor(readonly o: FaultStackOptions) {
    this.dir = mkdtempSync(join(tmpdir(), 'kinf-faults-'));
  }

  static async start(o: FaultStackOptions): Promise<FaultStack> {
    registerCleanup();
    const s = new FaultStack(o);
    try {
      await s.#start();
      return s;
    } catch (e) {
      await s.stop();
      throw e;
    }
  }

  get redisUrl(): string {
    return this.#redis.url;
  }

  /** A client of the index's Redis (caller quits it). */
  redisClient(): Redis {
    const c = new Redis(this.#redis.url, { lazyConnect: false, maxRetriesPerRequest: 1 });
    // Redis is killed on purpose here: a refused reconnect is expected, not an unhandled error event.
    c.on('error', () => undefined);
    return c;
  }

  #run(args: string[], what: string): ChildProcess {
    const p = spawn(process.execPath, [...cliArgv(), ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      cwd: packageRoot(),
    });
    this.#pipe(p, what);
    live.add(p);
    p.once('exit', () => live.delete(p));
    return p;
  }

  #pipe(p: ChildProcess, what: string): void {
    p.stderr?.on('data', (d: Buffer) => {
      if (this.o.childLog) appendFileSync(this.o.childLog, `[${what}] ${d.toString('utf8')}`);
      else if (process.env.KINF_FAULTS_LOG) process.stderr.write(`[${what}] ${d.toString('utf8')}`);
    });
  }

  async #start(): Promise<void> {
    const o = this.o;
    this.#redis = await startRedisServer({ extraArgs: ['--enable-debug-command', 'yes'] });
    await this.#readRedisPid();
    const ports = new Set<number>();
    while (ports.size < 3 * o.pods + 2) ports.add(await freeLoopbackPort());
    const p = [...ports];
    for (let i = 0; i < o.pods; i++)
      this.pods.push({
        id: `pod-${i}`,
        host: '127.0.0.1',
        port: p[3 * i]!,
        kv: p[3 * i + 1]!,
        replay: p[3 * i + 2]!,
      });
    [this.#collectorPort, this.#gatewayPort] = p.slice(3 * o.pods) as [number, number];
    const fleet = {
      redis_url: this.#redis.url,
      redis_key_prefix: this.keyPrefix,
      models: {
        [o.model.name]: {
          tokenizer: o.model.tokenizerSpec,
          chat_template: o.model.templateSpec,
          block_size: 16,
        },
      },
      pods: this.pods.map((pod) => ({
        id: pod.id,
        model: o.model.name,
        address: `${pod.host}:${pod.port}`,
        kv_events: `tcp://${pod.host}:${pod.kv}`,
        // As vLLM is deployed for the collector (docs/collector.md): without it a pod whose index was lost
        // (Redis restarted empty) is refilled only by its next events.
        kv_events_replay: `tcp://${pod.host}:${pod.replay}`,
        metrics: `http://${pod.host}:${pod.port}/metrics`,
      })),
      collector: {
        listen: `127.0.0.1:${this.#collectorPort}`,
        scrape_interval_ms: o.scrapeIntervalMs ?? 200,
      },
      emulator: {
        profile: 'l40s-27b-fp8',
        time_scale: o.timeScale,
        kv_capacity_tokens: o.kvCapacityTokens,
        seed: 42,
        prompt_tokens_details: true,
      },
    };
    this.#fleetPath = join(this.dir, 'fleet.yaml');
    writeFileSync(this.#fleetPath, stringify(fleet));
    // The pods, the collector and the gateway start side by side: none needs another to come up, and on a
    // loaded machine their process starts are most of the stack's start-up.
    const parts: Promise<void>[] = [...this.pods.map((pod) => this.startPod(pod.id)), this.startCollector()];
    const pluginConfig = {
      redis_url: this.#redis.url,
      redis_key_prefix: this.keyPrefix,
      tokenizer: o.model.tokenizerSpec,
      chat_template: o.model.templateSpec,
      block_size: 16,
      model_pods: { [o.model.name]: this.pods.map((pod) => `${pod.host}:${pod.port}`) },
      // The route's step timings reach the stand-in's events (x-kinference-route-timings): the lookup's share.
      expose_headers: true,
      ...o.pluginExtra,
    };
    const kong = {
      _format_version: '3.0',
      services: [
        {
          name: 'vllm',
          url: `http://${this.pods[0]!.host}:${this.pods[0]!.port}`,
          retries: 0,
          read_timeout: 600000,
          routes: [
            {
              name: 'chat',
              paths: ['/v1/chat/completions'],
              methods: ['POST'],
              strip_path: false,
              response_buffering: false,
              plugins: [{ name: 'kinference', config: pluginConfig }],
            },
          ],
        },
      ],
    };
    const kongPath = join(this.dir, 'kong.json');
    writeFileSync(kongPath, JSON.stringify(kong));
    parts.push(this.#startGateway(kongPath));
    // Every part settles before a failure is thrown, so that stop() finds each process it must end.
    const failed = (await Promise.allSettled(parts)).find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  async #readRedisPid(): Promise<void> {
    const c = this.redisClient();
    try {
      const info = await c.info('server');
      if (this.#redisPid) redisPids.delete(this.#redisPid);
      this.#redisPid = Number(/process_id:(\d+)/.exec(info)?.[1] ?? 0);
      if (!this.#redisPid) throw new Error('redis INFO server has no process_id');
      redisPids.add(this.#redisPid);
    } finally {
      c.disconnect();
    }
  }

  async #startGateway(kongPath: string): Promise<void> {
    const pluginsDir = (await this.o.pluginsDir) ?? defaultPluginsDir();
    const here = fileURLToPath(import.meta.url);
    const child = here.endsWith('.ts')
      ? here.replace(/stack\.ts$/, 'gateway-child.ts')
      : here.replace(/stack\.js$/, 'gateway-child.js');
    const g = fork(
      child,
      [kongPath, String(this.#gatewayPort), pluginsDir, this.dir, join(this.dir, 'plugin-state.json')],
      {
        execArgv: here.endsWith('.ts') ? ['--import', 'tsx'] : [],
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      },
    );
    this.#pipe(g, 'gateway');
    live.add(g);
    gatewayChildren.add(g);
    g.once('exit', () => live.delete(g));
    this.#gateway = g;
    const listening = new Promise<string>((resolve, reject) => {
      g.once('exit', (code) => reject(new Error(`stand-in child exited (${code}) before listening`)));
      g.on('message', (r: GatewayReply) => {
        if (r.id === 0 && r.listening) resolve(r.listening);
        const w = this.#waiting.get(r.id);
        if (w) {
          this.#waiting.delete(r.id);
          w(r);
        }
      });
    });
    this.gatewayUrl = await listening;
  }

  async #ask(cmd: GatewayMessage['cmd']): Promise<GatewayReply> {
    const g = this.#gateway;
    if (!g || !g.connected) throw new Error('stand-in child not running');
    const id = this.#ipcId++;
    const r = await new Promise<GatewayReply>((resolve, reject) => {
      const gone = (): void => reject(new Error(`stand-in child exited during ${cmd}`));
      this.#waiting.set(id, (reply) => {
        g.off('exit', gone);
        resolve(reply);
      });
      g.once('exit', gone);
      g.send({ id, cmd } satisfies GatewayMessage);
    });
    if (!r.ok) throw new Error(`stand-in ${cmd}: ${r.error}`);
    return r;
  }

  gatewayStats(): Promise<GatewayStats> {
    return this.#ask('stats').then((r) => r.stats!);
  }

  /** The plugin server's process.memoryUsage() after a full GC, and what the plugin holds. */
  pluginDump(): Promise<Record<string, unknown>> {
    return this.#ask('dump').then((r) => r.dump as Record<string, unknown>);
  }

  async startPod(id: string): Promise<void> {
    const pod = this.pods.find((p) => p.id === id)!;
    const p = this.#run(['emulator', '--config', this.#fleetPath, '--pod', id], id);
    this.#podProcs.set(id, p);
    await until(
      `pod ${id}`,
      async () => (await httpStatus(pod.host, pod.port, '/health')) === 200,
      START_MS,
      p,
    );
  }

  async killPod(id: string): Promise<void> {
    const p = this.#podProcs.get(id);
    if (p) await stopChild(p, 'SIGKILL');
  }

  async startCollector(): Promise<void> {
    const p = this.#run(['collector', '--config', this.#fleetPath], 'collector');
    this.#collector = p;
    await until(
      'collector',
      async () => (await httpStatus('127.0.0.1', this.#collectorPort, '/healthz')) === 200,
      START_MS,
      p,
    );
  }

  async killCollector(): Promise<void> {
    if (this.#collector) await stopChild(this.#collector, 'SIGKILL');
  }

  /** The collector's /metrics text (RSS and heap are prom-client's default metrics). */
  collectorMetrics(): Promise<string> {
    return httpText('127.0.0.1', this.#collectorPort, '/metrics');
  }

  async killPluginServer(): Promise<void> {
    await this.#ask('kill-plugin-server');
  }

  pluginServersReady(): Promise<unknown> {
    return this.#ask('ready');
  }

  async killRedis(): Promise<void> {
    await this.#redis.kill();
  }

  /** Starts the killed Redis again on its port, empty. */
  async restartRedisEmpty(): Promise<void> {
    await this.#redis.restart();
    await this.#readRedisPid();
  }

  hangRedis(): void {
    process.kill(this.#redisPid, 'SIGSTOP');
  }

  resumeRedis(): void {
    process.kill(this.#redisPid, 'SIGCONT');
  }

  /**
   * Redis answers slowly: one connection keeps Redis busy in `DEBUG SLEEP` (sleepMs at a time), so every
   * other command waits up to that long, until stopSlow().
   */
  slowRedis(sleepMs: number): void {
    const c = new Redis(this.#redis.url, { maxRetriesPerRequest: 0 });
    c.on('error', () => undefined);
    let on = true;
    const loop = (async () => {
      while (on) await c.call('DEBUG', 'SLEEP', String(sleepMs / 1000)).catch(() => undefined);
    })();
    this.#slow = {
      stop: async () => {
        on = false;
        await loop;
        c.disconnect();
      },
    };
  }

  async stopSlow(): Promise<void> {
    await this.#slow?.stop();
    this.#slow = null;
  }

  /** Block keys of the index (what the collector writes for the pods' caches). */
  async indexKeys(): Promise<number> {
    const c = this.redisClient();
    try {
      let n = 0;
      let cursor = '0';
      do {
        const [next, keys] = await c.scan(cursor, 'MATCH', `${this.keyPrefix}:*:b:*`, 'COUNT', 1000);
        cursor = next;
        n += keys.length;
      } while (cursor !== '0');
      return n;
    } finally {
      c.disconnect();
    }
  }

  /** Redis INFO memory used_memory and the number of keys. */
  async redisMemory(): Promise<{ usedBytes: number; keys: number }> {
    const c = this.redisClient();
    try {
      const info = await c.info('memory');
      return { usedBytes: Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0), keys: await c.dbsize() };
    } finally {
      c.disconnect();
    }
  }

  pid(what: 'collector' | 'gateway'): number | undefined {
    return (what === 'collector' ? this.#collector : this.#gateway)?.pid;
  }

  async stop(): Promise<void> {
    try {
      if (this.#slow) await this.stopSlow().catch(() => undefined);
      if (this.#redisPid) {
        try {
          process.kill(this.#redisPid, 'SIGCONT');
        } catch {
          // already gone
        }
      }
      const g = this.#gateway;
      if (g && g.connected)
        await Promise.race([
          this.#ask('close').catch(() => undefined),
          new Promise((r) => setTimeout(r, 10_000)),
        ]);
      if (g) await stopChild(g);
      await Promise.all(
        [...this.#podProcs.values(), ...(this.#collector ? [this.#collector] : [])].map((p) => stopChild(p)),
      );
      await this.#redis?.stop();
      redisPids.delete(this.#redisPid);
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
