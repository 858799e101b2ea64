import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisSentinel, type RedisSentinelSetup } from '../../../harness/redis-sentinel.js';
import { type KvIndex } from '../../../src/index/index.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { startIndexRedis, type IndexRedis } from '../../helpers/redis-cluster.js';
import { FakeVllmPublisher } from '../../helpers/collector/fake-publisher.js';
import { BS, MODEL, freshTokens, waitCached } from '../../helpers/collector/collector-harness.js';
import { observerIndex } from '../../helpers/observer-index.js';

// On a standalone Redis, on a 3-shard Redis Cluster (`redis_cluster: true`: the index and the writer lease,
// reached through `redis_cluster_nodes` with the node of `redis_url` down), and through Redis Sentinel
// (`redis_sentinels`, `redis_sentinel_master`: a primary, a replica, three sentinels).
describe.each([
  { redis: 'Redis', cluster: false, sentinel: false },
  { redis: 'a Redis Cluster', cluster: true, sentinel: false },
  { redis: 'Redis Sentinel', cluster: false, sentinel: true },
])('kinference collector --config (a real child process) on $redis', ({ cluster, sentinel }) => {
  let redis: IndexRedis;
  let sentinels: RedisSentinelSetup | null = null;
  let index: KvIndex;
  let pub: FakeVllmPublisher;
  let proc: ChildProcess;
  let dir: string;
  let listen: string;
  let stderr = '';

  beforeAll(async () => {
    if (sentinel) {
      const s = (sentinels = await startRedisSentinel({ replicas: 1 }));
      redis = { url: s.url, cluster: false, stop: () => s.stop() };
    } else redis = await startIndexRedis(cluster, MODEL);
    index = observerIndex({
      kind: 'redis',
      url: redis.url,
      cluster,
      keyPrefix: 'kcli',
      ...(sentinels ? { sentinel: { nodes: sentinels.sentinelAddresses, master: sentinels.master } } : {}),
    });
    pub = await new FakeVllmPublisher({ format: 'array' }, { topic: 'kv' }).bind();
    dir = mkdtempSync(join(tmpdir(), 'kinf-collector-'));
    listen = `127.0.0.1:${await freePort()}`;
    const config = join(dir, 'fleet.yaml');
    writeFileSync(
      config,
      [
        // On the Cluster, the node of redis_url is down: the collector starts from redis_cluster_nodes.
        ...(cluster
          ? [
              `redis_url: redis://127.0.0.1:${await freePort()}`,
              'redis_cluster: true',
              `redis_cluster_nodes: [${redis.url.replace(/^redis:\/\//, '').replace(/\/.*$/, '')}]`,
            ]
          : sentinels
            ? [
                // The host of redis_url is not used with Sentinel: it names a port nothing listens on.
                `redis_url: ${redis.url}`,
                `redis_sentinels: [${sentinels.sentinelAddresses.join(', ')}]`,
                `redis_sentinel_master: ${sentinels.master}`,
              ]
            : [`redis_url: ${redis.url}`, 'redis_cluster: false']),
        'redis_key_prefix: kcli',
        'models:',
        `  ${MODEL}:`,
        '    tokenizer: tiktoken:o200k_base',
        '    chat_template: chatml',
        `    block_size: ${BS}`,
        'pods:',
        '  - id: pod-c',
        `    model: ${MODEL}`,
        '    address: 127.0.0.1:18099',
        `    kv_events: ${pub.endpoint}`,
        `    kv_events_replay: ${pub.replayEndpoint}`,
        '    kv_events_topic: kv',
        'collector:',
        `  listen: ${listen}`,
        '  log_level: info',
      ].join('\n'),
    );
    proc = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'collector', '--config', config], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  }, 60_000);

  afterAll(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    }
    await pub?.close();
    await index?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves /healthz and /metrics, indexes events, and exits 0 on SIGTERM after flushing', async () => {
    await waitFor('/healthz', async () => (await fetch(`http://${listen}/healthz`)).status === 200, 60_000);
    const health = (await (await fetch(`http://${listen}/healthz`)).json()) as { streams: { pod: string }[] };
    expect(health.streams.map((s) => s.pod)).toEqual(['pod-c']);

    // Slow joiner: probe until the collector's own /metrics shows a batch.
    await waitFor('subscribed', async () => {
      const text = await (await fetch(`http://${listen}/metrics`)).text();
      if (/kinference_collector_batches_total\{pod="pod-c"\} [1-9]/.test(text)) return true;
      await pub.publish([]);
      return false;
    });
    const t = freshTokens(3);
    await pub.publish([
      { type: 'BlockStored', hashes: [1n, 2n, 3n], parent: null, tokens: t, blockSize: BS },
    ]);
    await waitCached(index, 'pod-c', t, 3);
    const metrics = await fetch(`http://${listen}/metrics`);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    expect(await metrics.text()).toMatch(
      /kinference_collector_block_events_total\{pod="pod-c",kind="stored"\} 3/,
    );

    const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGTERM');
    expect(await exit).toBe(0);
    const lines = stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { level: string; msg: string; flushed?: boolean });
    expect(lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining(['collector listening', 'pod added', 'shutting down', 'stopped']),
    );
    expect(lines.find((l) => l.msg === 'stopped')?.flushed).toBe(true);
  }, 120_000); // the process starts and imports first: tens of seconds on a loaded 2-core host
});
