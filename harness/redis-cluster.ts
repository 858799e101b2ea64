// Starts a private Redis Cluster of redis-server children on free ports, for tests and benchmarks.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freeLoopbackPort, startRedisServer, type RedisServer } from './redis-server.js';
import { waitFor } from './wait-for.js';

/**
 * A private Redis Cluster of cluster-enabled redis-server children on free loopback ports, for benchmarks
 * and tests (which migrate slots, add replicas and kill nodes). Nothing outlives `stop()`.
 */
export interface ClusterNode {
  server: RedisServer & { busPort: number };
  /** A plain client of this node alone (admin commands). */
  admin: Redis;
  id: string;
  url: string;
}

export interface RedisClusterProcesses {
  nodes: ClusterNode[];
  /** The index of the node serving `slot`, as node 0 sees it. */
  ownerOf(slot: number): Promise<number>;
  slotOf(key: string): Promise<number>;
  /** Starts one more node as a replica of node `of`, synced; it is appended to `nodes`. */
  addReplica(of: number): Promise<ClusterNode>;
  /** Moves a slot and its keys to another node (the MIGRATING / IMPORTING / MIGRATE / SETSLOT NODE dance). */
  moveSlot(slot: number, to: number): Promise<void>;
  stop(): Promise<void>;
}

const SLOTS = 16384;

/**
 * One cluster-enabled redis-server with its files in `dir`. Its cluster bus gets a free port of its own:
 * the default (port + 10000) may be taken, or past 65535 for a high free port.
 */
export async function startClusterNode(
  dir: string,
  name: string,
): Promise<RedisServer & { busPort: number }> {
  const busPort = await freeLoopbackPort();
  const server = await startRedisServer({
    extraArgs: [
      '--cluster-enabled',
      'yes',
      '--cluster-port',
      String(busPort),
      '--cluster-config-file',
      join(dir, `${name}.conf`),
      '--cluster-node-timeout',
      '2000',
      '--dir',
      dir,
      '--dbfilename',
      `${name}.rdb`,
    ],
  });
  return Object.assign(server, { busPort });
}

/** Introduces `b` to `a`'s cluster (with its bus port: not port + 10000 here). */
async function meet(a: ClusterNode, b: ClusterNode): Promise<void> {
  await a.admin.call('CLUSTER', 'MEET', '127.0.0.1', String(b.server.port), String(b.server.busPort));
}

async function clusterOk(n: ClusterNode, nodes: number): Promise<boolean> {
  const info = String(await n.admin.call('CLUSTER', 'INFO'));
  return /cluster_state:ok/.test(info) && new RegExp(`cluster_known_nodes:${nodes}\\b`).test(info);
}

/** `size` primaries with the slots split evenly; resolves once every node sees the whole cluster. */
export async function startRedisCluster(size = 3): Promise<RedisClusterProcesses> {
  const dir = mkdtempSync(join(tmpdir(), 'kinf-cluster-'));
  const nodes: ClusterNode[] = [];
  const stop = async (): Promise<void> => {
    for (const n of nodes) n.admin.disconnect();
    await Promise.all(nodes.map((n) => n.server.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  const startNode = async (): Promise<ClusterNode> => {
    const server = await startClusterNode(dir, `node-${nodes.length}`);
    const admin = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    admin.on('error', () => {});
    const id = String(await admin.call('CLUSTER', 'MYID'));
    return { server, admin, id, url: `redis://127.0.0.1:${server.port}` };
  };
  try {
    for (let i = 0; i < size; i++) nodes.push(await startNode());
    for (let i = 0; i < size; i++) {
      const from = Math.floor((SLOTS * i) / size);
      const to = Math.floor((SLOTS * (i + 1)) / size) - 1;
      await nodes[i]!.admin.call('CLUSTER', 'ADDSLOTSRANGE', String(from), String(to));
      if (i > 0) await meet(nodes[0]!, nodes[i]!);
    }
    await waitFor(
      'every node sees a whole cluster',
      async () => {
        for (const n of nodes) if (!(await clusterOk(n, size))) return false;
        return true;
      },
      20_000,
    );
  } catch (e) {
    await stop();
    throw e;
  }

  const ownerOnNode = async (n: ClusterNode, slot: number): Promise<string | null> => {
    const ranges = (await n.admin.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const r = ranges.find(([a, b]) => slot >= a && slot <= b);
    return r ? r[2][2] : null;
  };
  const ownerOf = async (slot: number): Promise<number> => {
    const id = await ownerOnNode(nodes[0]!, slot);
    return nodes.findIndex((n) => n.id === id);
  };

  return {
    nodes,
    ownerOf,
    async slotOf(key) {
      return Number(await nodes[0]!.admin.call('CLUSTER', 'KEYSLOT', key));
    },
    async addReplica(of) {
      const node = await startNode();
      nodes.push(node);
      const primary = nodes[of]!;
      await meet(primary, node);
      await waitFor('the new node sees the whole cluster', () => clusterOk(node, nodes.length), 20_000);
      await node.admin.call('CLUSTER', 'REPLICATE', primary.id);
      await waitFor(
        'the replica is in sync',
        async () => /master_link_status:up/.test(await node.admin.info('replication')),
        20_000,
      );
      return node;
    },
    async moveSlot(slot, to) {
      const fromIdx = await ownerOf(slot);
      const from = nodes[fromIdx]!;
      const dest = nodes[to]!;
      if (fromIdx === to) return;
      await dest.admin.call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', from.id);
      await from.admin.call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', dest.id);
      for (;;) {
        const keys = (await from.admin.callBuffer(
          'CLUSTER',
          'GETKEYSINSLOT',
          String(slot),
          '100',
        )) as Buffer[];
        if (keys.length === 0) break;
        await from.admin.call(
          'MIGRATE',
          '127.0.0.1',
          String(dest.server.port),
          '',
          '0',
          '5000',
          'KEYS',
          ...keys,
        );
      }
      for (const n of [dest, from, ...nodes.filter((n) => n !== dest && n !== from)])
        await n.admin.call('CLUSTER', 'SETSLOT', String(slot), 'NODE', dest.id);
      await waitFor(
        `every node sees slot ${slot} on node ${to}`,
        async () => {
          for (const n of nodes) if ((await ownerOnNode(n, slot)) !== dest.id) return false;
          return true;
        },
        20_000,
      );
    },
    stop,
  };
}
