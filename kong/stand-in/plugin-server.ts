// Kong's plugin-server supervision: the query command at start, the start command restarted on exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { KinferenceError } from '../../src/core/errors.js';
import { nginxWorkerEnv } from './nginx-env.js';
import type { KongFieldEntry } from '../../src/config/to-kong-schema.js';

/**
 * Kong's plugin-server supervision (runloop/plugin_servers/process.lua, kong.md §4.1): the query command runs
 * once at start and its stdout must be JSON (only the FIRST plugin is taken, Kong ≥ 3.9); the start command is
 * spawned through a shell with stderr merged into stdout and nginx's worker environment (nginx-env.ts), its
 * output copied to the log as `[name:pid] line`, and it is respawned — at most once per second — whenever it
 * exits. SIGTERM on stop.
 */

export interface PluginServerDef {
  name: string;
  socket: string;
  startCmd: string | null;
  queryCmd: string;
}

export interface PluginInfo {
  Name: string;
  Version: string;
  Priority: number;
  Phases: string[];
  Schema: { name: string; fields: [{ config: { type: 'record'; fields: KongFieldEntry[] } }] };
}

export type Logger = (level: 'debug' | 'info' | 'notice' | 'warn' | 'err', msg: string) => void;

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g;

/** Runs the query command like Kong's io.popen at init, with a timeout Kong lacks (a hang blocks Kong forever). */
export async function queryPlugin(def: PluginServerDef, timeoutMs = 30_000): Promise<PluginInfo> {
  const child = spawn('/bin/sh', ['-c', def.queryCmd], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => err.push(b));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new KinferenceError(
          'KINF_ERR_CONFIG',
          `plugin server ${def.name}: query command did not exit within ${timeoutMs} ms (a timer or socket opened at plugin load keeps it alive): ${def.queryCmd}`,
        ),
      );
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  const stdout = Buffer.concat(out).toString('utf8');
  if (code !== 0)
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `plugin server ${def.name}: query command exited with ${code}: ${Buffer.concat(err).toString('utf8').slice(0, 2000)}`,
    );
  let dump: unknown;
  try {
    dump = JSON.parse(stdout);
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `plugin server ${def.name}: query command output is not JSON (anything else on stdout breaks Kong): ${stdout.slice(0, 300)}`,
      { cause: e },
    );
  }
  const list = (dump as { Plugins?: unknown }).Plugins ?? dump;
  const info = Array.isArray(list) ? (list[0] as PluginInfo | undefined) : undefined;
  if (!info || typeof info !== 'object')
    throw new KinferenceError('KINF_ERR_CONFIG', `plugin server ${def.name}: no plugin info`);
  if (typeof info.Name !== 'string')
    throw new KinferenceError('KINF_ERR_CONFIG', `plugin server ${def.name}: plugin without Name`);
  if (typeof info.Version !== 'string' || !/^\d+\.\d+\.\d+/.test(info.Version))
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `plugin ${info.Name}: Version must be "x.y.z", got ${JSON.stringify(info.Version)}`,
    );
  if (!Number.isInteger(info.Priority))
    throw new KinferenceError('KINF_ERR_CONFIG', `plugin ${info.Name}: Priority must be an integer`);
  if (!Array.isArray(info.Phases))
    throw new KinferenceError('KINF_ERR_CONFIG', `plugin ${info.Name}: Phases missing`);
  const fields = info.Schema?.fields?.[0]?.config?.fields;
  if (!Array.isArray(fields))
    throw new KinferenceError('KINF_ERR_CONFIG', `plugin ${info.Name}: Schema has no config fields`);
  return info;
}

export class PluginServerProcess {
  readonly def: PluginServerDef;
  #log: Logger;
  #child: ChildProcess | null = null;
  #stopping = false;
  #lastSpawnAt = 0;
  #respawnTimer: NodeJS.Timeout | null = null;
  #spawns = 0;
  #exitWaiters: (() => void)[] = [];

  constructor(def: PluginServerDef, log: Logger) {
    this.def = def;
    this.#log = log;
  }

  /** How many times the start command was spawned (1 + respawns). */
  get spawns(): number {
    return this.#spawns;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(): void {
    if (!this.def.startCmd) {
      this.#log(
        'warn',
        `plugin server ${this.def.name}: no start command, assuming external process management`,
      );
      return;
    }
    this.#spawn();
  }

  #spawn(): void {
    this.#respawnTimer = null;
    if (this.#stopping || !this.def.startCmd) return;
    this.#lastSpawnAt = Date.now();
    this.#spawns++;
    // Spawned from an nginx worker in Kong: only TZ and the variables `env` directives declare.
    const child = spawn('/bin/sh', ['-c', `exec ${this.def.startCmd}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: nginxWorkerEnv(process.env),
    });
    this.#child = child;
    const name = this.def.name;
    const copy = (stream: NodeJS.ReadableStream): void => {
      // node-color-log redraws a line several times (cursor-up + erase): keep only the final version.
      let pending: string | null = null;
      let timer: NodeJS.Timeout | null = null;
      const flush = (): void => {
        if (timer) clearTimeout(timer);
        timer = null;
        if (pending) this.#log('info', `[${name}:${child.pid}] ${pending}`);
        pending = null;
      };
      const rl = createInterface({ input: stream });
      rl.on('line', (raw) => {
        const line = raw.replace(ANSI, '').trimEnd();
        if (line === '') return;
        if (pending !== null && !line.startsWith(pending)) flush();
        pending = line;
        timer ??= setTimeout(flush, 50).unref();
      });
      rl.on('close', flush);
    };
    copy(child.stdout!);
    copy(child.stderr!);
    child.on('error', (e) => this.#log('err', `plugin server ${name}: ${e.message}`));
    child.on('exit', (code, signal) => {
      if (this.#child === child) this.#child = null;
      const waiters = this.#exitWaiters;
      this.#exitWaiters = [];
      for (const w of waiters) w();
      if (this.#stopping) return;
      this.#log(
        'err',
        `external pluginserver '${name}' terminated: ${code === 127 ? 'command not found' : signal ? `signal ${signal}` : `exit code ${code}`}`,
      );
      const wait = Math.max(0, this.#lastSpawnAt + 1000 - Date.now());
      this.#respawnTimer = setTimeout(() => {
        this.#log('notice', `respawning pluginserver '${name}'`);
        this.#spawn();
      }, wait);
    });
  }

  /** For fault tests: kill the server process as a crash would (the supervisor respawns it). */
  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.#exitWaiters.push(resolve);
      child.kill(signal);
    });
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#respawnTimer) clearTimeout(this.#respawnTimer);
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => child.kill('SIGKILL'), 5000);
      child.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      child.kill('SIGTERM');
    });
  }
}
