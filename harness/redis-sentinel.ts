// Starts a private Redis Sentinel setup (a primary, replicas, three sentinels) on free ports, for tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { KinferenceError } from '../src/core/errors.js';
import { freeLoopbackPort, redisAnswers, startRedisServer, type RedisServer } from './redis-server.js';
import { waitFor } from './wait-for.js';

/** One data node (a redis-server): the primary or a replica, as the sentinels last decided. */
export interface SentinelDataNode {
  server: RedisServer;
  /** A plain client of this node alone (INFO, admin commands). */
  admin: Redis;
  address: string;
}

export interface SentinelProcess {
  port: number;
  address: string;
  /** A plain client of this sentinel (SENTINEL commands). */
  admin: Redis;
  kill(): Promise<void>;
}

/**
 * A primary, its replicas and sentinels watching it, all on free loopback ports, nothing persisted.
 * Sentinels declare the primary down after `downAfterMs` (default 1000) with a quorum of 2.
 */
export interface RedisSentinelSetup {
  /** The master name the sentinels monitor. */
  master: string;
  /** Data nodes; nodes[0] was the primary at start. */
  nodes: SentinelDataNode[];
  sentinels: SentinelProcess[];
  /** host:port of every sentinel, as redis_sentinels takes them. */
  sentinelAddresses: string[];
  /**
   * A redis_url for the data nodes (database 0, no password): its host and port are not used with
   * Sentinel, so they name a port nothing listens on, to prove it.
   */
  url: string;
  /** The index in `nodes` of the node the sentinels name as primary (asked of every live sentinel). */
  primary(): Promise<number>;
  /** Resolves with the new primary once every live sentinel names a node other than nodes[`old`]. */
  promotedAfter(old: number): Promise<number>;
  /** True when every live replica is linked and has every write the primary had when asked. */
  replicasInSync(): Promise<boolean>;
  stop(): Promise<void>;
}

function replicationOffset(info: string, field: string): number | null {
  const m = new RegExp(`${field}:(\\d+)`).exec(info);
  return m ? Number(m[1]) : null;
}

async function launchSentinel(
  dir: string,
  i: number,
  master: string,
  primaryPort: number,
  downAfterMs: number,
) {
  const port = await freeLoopbackPort();
  // A sentinel rewrites its config file (what it learnt, epochs): each gets its own, in a private dir.
  const conf = join(dir, `sentinel-${i}.conf`);
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      // Its log says why a failover took long (votes, the replica it picked); failures quote its tail.
      'loglevel notice',
      `logfile ${join(dir, `sentinel-${i}.log`)}`,
      `sentinel monitor ${master} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${master} ${downAfterMs}`,
      // Also the pause between two failovers of the master (twice this): short, so tests can fail over again.
      `sentinel failover-timeout ${master} 3000`,
      `sentinel parallel-syncs ${master} 1`,
      '',
    ].join('\n'),
  );
  const proc: ChildProcess = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  let failure: Error | null = null;
  proc.on('error', (e) => (failure = e));
  proc.on('exit', (code) => (failure ??= new Error(`redis-sentinel exited with code ${code}`)));
  await waitFor(`sentinel ${i} answers on port ${port}`, async () => {
    if (failure)
      throw new KinferenceError(
        'KINF_ERR_REDIS',
        `cannot start a sentinel on port ${port}: ${String(failure)}`,
      );
    return redisAnswers(port);
  });
  const admin = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  admin.on('error', () => {});
  // A sentinel whose timer runs 2 s late (starved on a loaded CI runner) enters TILT and takes no action
  // for 30 s: a failover then outlasts any test's wait. Only a stall of 10 s tilts it here, for 3 s.
  await admin.call('SENTINEL', 'DEBUG', 'tilt-trigger', '10000', 'tilt-period', '3000');
  const exited = (): boolean => proc.exitCode !== null || proc.signalCode !== null;
  const stopWith = async (signal: NodeJS.Signals): Promise<void> => {
    admin.disconnect();
    if (exited()) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill(signal);
    });
  };
  return {
    port,
    address: `127.0.0.1:${port}`,
    admin,
    kill: () => stopWith('SIGKILL'),
    // Nothing of a sentinel is worth a clean shutdown here (its config file goes with the directory).
    stop: () => stopWith('SIGKILL'),
  };
}

/**
 * Starts the primary, `replicas` replicas (synced), then three sentinels; resolves once every sentinel
 * knows every replica and the other sentinels, so a failover can start at once.
 */
export async function startRedisSentinel(
  opts: { replicas?: number; downAfterMs?: number; master?: string } = {},
): Promise<RedisSentinelSetup> {
  const master = opts.master ?? 'kinf-primary';
  const downAfterMs = opts.downAfterMs ?? 1000;
  const dir = mkdtempSync(join(tmpdir(), 'kinf-sentinel-'));
  const nodes: SentinelDataNode[] = [];
  const sentinels: (SentinelProcess & { stop(): Promise<void> })[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(sentinels.map((s) => s.stop()));
    for (const n of nodes) n.admin.disconnect();
    await Promise.all(nodes.map((n) => n.server.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  const addNode = async (extraArgs: string[]): Promise<SentinelDataNode> => {
    const server = await startRedisServer({ extraArgs: ['--dir', dir, ...extraArgs] });
    const admin = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    admin.on('error', () => {});
    const node = { server, admin, address: `127.0.0.1:${server.port}` };
    nodes.push(node);
    return node;
  };
  try {
    const primary = await addNode([]);
    for (let i = 0; i < (opts.replicas ?? 1); i++) {
      const r = await addNode(['--replicaof', '127.0.0.1', String(primary.server.port)]);
      await waitFor(
        'the replica is in sync',
        async () => /master_link_status:up/.test(await r.admin.info('replication')),
        20_000,
      );
    }
    for (let i = 0; i < 3; i++)
      sentinels.push(await launchSentinel(dir, i, master, primary.server.port, downAfterMs));
    await waitFor(
      'every sentinel knows every replica and the other sentinels',
      async () => {
        for (const s of sentinels) {
          const fields = (await s.admin.call('SENTINEL', 'MASTER', master)) as string[];
          const get = (k: string): number => Number(fields[fields.indexOf(k) + 1]);
          if (get('num-slaves') !== nodes.length - 1 || get('num-other-sentinels') !== sentinels.length - 1)
            return false;
        }
        return true;
      },
      30_000,
      100,
    );
  } catch (e) {
    await stop();
    throw e;
  }

  /** What a sentinel thinks of the master and its replicas, for failure messages. */
  const view = async (sn: SentinelProcess): Promise<string> => {
    const get = (a: string[], k: string): string => a[a.indexOf(k) + 1] ?? '?';
    const m = (await sn.admin.call('SENTINEL', 'MASTER', master)) as string[];
    const reps = (await sn.admin.call('SENTINEL', 'REPLICAS', master)) as string[][];
    return [
      `master ${get(m, 'ip')}:${get(m, 'port')} (${get(m, 'flags')}, ${get(m, 'failover-state')})`,
      ...reps.map(
        (r) =>
          `replica ${get(r, 'ip')}:${get(r, 'port')} (${get(r, 'flags')}, link ${get(r, 'master-link-status')})`,
      ),
    ].join('; ');
  };
  /** The last lines sentinel `i` logged (its votes, failover steps), for failure messages. */
  const logTail = (i: number, lines = 40): string => {
    const file = join(dir, `sentinel-${i}.log`);
    return existsSync(file)
      ? readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
      : '(no log)';
  };
  const live = (): SentinelProcess[] => sentinels.filter((s) => s.admin.status === 'ready');
  const primaryIndex = async (): Promise<number> => {
    const named = new Set<string>();
    for (const s of live()) {
      const [host, port] = (await s.admin.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', master)) as string[];
      named.add(`${host}:${port}`);
    }
    // Sentinels that disagree (a failover under way) name no primary yet.
    return named.size === 1 ? nodes.findIndex((n) => named.has(n.address)) : -1;
  };
  return {
    master,
    nodes,
    sentinels,
    sentinelAddresses: sentinels.map((s) => s.address),
    url: `redis://127.0.0.1:${await freeLoopbackPort()}/0`,
    primary: primaryIndex,
    async promotedAfter(old) {
      try {
        return await waitFor(
          'the sentinels name a new primary, which serves as one',
          async () => {
            const now = await primaryIndex();
            if (now < 0 || now === old) return null;
            const role = await nodes[now]!.admin.info('replication');
            return /role:master/.test(role) ? now : null;
          },
          30_000,
          50,
        );
      } catch (e) {
        const named = await Promise.all(
          live().map((sn) => sn.admin.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', master).catch(String)),
        );
        const roles = await Promise.all(
          nodes.map((n) => n.admin.info('replication').then((i) => /role:(\w+)/.exec(i)?.[1], String)),
        );
        throw new Error(
          `${(e as Error).message}; sentinel 0 sees ${await view(live()[0]!).catch(String)}; the sentinels name ${JSON.stringify(named)}; nodes ${nodes.map((n, i) => `${n.address}=${roles[i]}`).join(' ')}; sentinel 0 logged:\n${logTail(0)}`,
          { cause: e },
        );
      }
    },
    async replicasInSync() {
      const p = await primaryIndex();
      if (p < 0) return false;
      const want = replicationOffset(await nodes[p]!.admin.info('replication'), 'master_repl_offset');
      for (const [i, n] of nodes.entries()) {
        if (i === p || n.admin.status !== 'ready') continue; // killed nodes replicate nothing
        const info = await n.admin.info('replication');
        // At least the primary's offset read before: the sentinels' hello messages move it on all the time.
        const got = replicationOffset(info, 'slave_repl_offset');
        if (!/master_link_status:up/.test(info) || got === null || want === null || got < want) return false;
      }
      return want !== null;
    },
    stop,
  };
}
