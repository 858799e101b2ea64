import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KinferenceError } from '../../../src/core/errors.js';
import {
  asIndexError,
  clusterOptions,
  clusterSeeds,
  failFastOptions,
  reconnectDelayMs,
  redactUrl,
  redisTlsOptions,
  sentinelOptions,
  sentinelReconnectDelayMs,
  withDeadline,
} from '../../../src/index/redis-connection.js';
import { RedisKvIndex } from '../../../src/index/index.js';

describe('redis connection policy', () => {
  it('never queues or replays commands, and connects lazily', () => {
    expect(failFastOptions()).toMatchObject({
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
    });
  });

  it('gives a Sentinel client the same rules, asks the sentinels again within 500 ms, and checks the role', () => {
    const tls = { servername: 'redis.internal' };
    const o = sentinelOptions(
      { nodes: ['10.0.0.5:26379', 'sentinel-b:26380'], master: 'kinf', password: 'sp' },
      { connectTimeoutMs: 700 },
      tls,
    );
    expect(o).toMatchObject({
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      sentinels: [
        { host: '10.0.0.5', port: 26379 },
        { host: 'sentinel-b', port: 26380 },
      ],
      name: 'kinf',
      role: 'master',
      sentinelPassword: 'sp',
      sentinelCommandTimeout: 700,
      // TLS to the data nodes, and (by default, as the URL) to the sentinels
      tls,
      enableTLSForSentinelMode: true,
      sentinelTLS: tls,
      failoverDetector: false,
    });
    expect(sentinelOptions({ nodes: ['s:1'], master: 'm', tls: false }, {}, tls).sentinelTLS).toBeUndefined();
    expect(sentinelOptions({ nodes: ['s:1'], master: 'm' })).not.toHaveProperty('tls');
    expect([1, 2, 3, 4, 5, 50].map(sentinelReconnectDelayMs)).toEqual([50, 100, 200, 400, 500, 500]);
  });

  it('gives a Cluster client the same rules: no queue, nothing resent after a close or CLUSTERDOWN', () => {
    const o = clusterOptions('rediss://app%40x:p%3Ass@10.0.0.5:7000/0', { connectTimeoutMs: 700 });
    expect(o).toMatchObject({
      lazyConnect: true,
      enableOfflineQueue: false,
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 0,
      slotsRefreshTimeout: 700,
      redisOptions: {
        maxRetriesPerRequest: 0,
        autoResendUnfulfilledCommands: false,
        connectTimeout: 700,
        username: 'app@x',
        password: 'p:ss',
        tls: {},
      },
    });
    expect(clusterOptions('redis://h:7000').redisOptions).not.toHaveProperty('tls');
    const servername = { tls: { servername: 'redis.internal' } };
    expect(clusterOptions('rediss://h:7000', servername).redisOptions?.tls).toEqual({
      servername: 'redis.internal',
    });
    expect(clusterOptions('redis://h:7000').redisOptions).not.toHaveProperty('password');
    expect(() => clusterOptions('redis://h:7000/2')).toThrow(/only database 0/);
  });

  it('starts a Cluster client from the URL node, then redis_cluster_nodes in order; a bad node is an error', () => {
    expect(clusterSeeds('rediss://u:p@10.0.0.5:7000/0', ['10.0.0.6:7001', 'redis-b.ns.svc:7002'])).toEqual([
      { host: '10.0.0.5', port: 7000 },
      { host: '10.0.0.6', port: 7001 },
      { host: 'redis-b.ns.svc', port: 7002 },
    ]);
    expect(clusterSeeds('redis://[::1]/0')).toEqual([{ host: '::1', port: 6379 }]);
    for (const bad of ['10.0.0.6', 'h:0', 'h:65536', 'h:7000/0', 'redis://h:7000']) {
      const e = (() => {
        try {
          clusterSeeds('redis://h:7000', [bad]);
        } catch (x) {
          return x as KinferenceError;
        }
        throw new Error(`accepted ${bad}`);
      })();
      expect(e.code, bad).toBe('KINF_ERR_CONFIG');
      expect(e.message).toContain(`redis_cluster_nodes: "${bad}"`);
    }
  });

  it('refuses redis_cluster_nodes without redis_cluster when the index is built', () => {
    expect(
      () => new RedisKvIndex({ url: 'redis://127.0.0.1:7000', clusterNodes: ['127.0.0.1:7001'] }),
    ).toThrow(/redis_cluster_nodes is set \(127.0.0.1:7001\) but redis_cluster is not/);
    // An empty list is no list.
    void new RedisKvIndex({ url: 'redis://127.0.0.1:7000', clusterNodes: [] }).close();
  });

  it('says to set redis_cluster when a plain client gets a redirection', () => {
    for (const msg of ['MOVED 3999 10.0.0.6:7001', 'ASK 3999 10.0.0.6:7001']) {
      const e = asIndexError(new Error(msg), 'lookup');
      expect(e.code).toBe('KINF_ERR_CONFIG');
      expect(e.message).toContain('set redis_cluster: true');
    }
    expect(asIndexError(new Error('MOVEDX'), 'lookup').code).toBe('KINF_ERR_REDIS');
  });

  it('backs off from 50 ms to a 2 s cap and never gives up', () => {
    const delays = Array.from({ length: 20 }, (_, i) => reconnectDelayMs(i + 1));
    expect(delays.slice(0, 7)).toEqual([50, 100, 200, 400, 800, 1600, 2000]);
    expect(delays.every((d) => d > 0 && d <= 2000)).toBe(true);
    for (let i = 1; i < delays.length; i++) expect(delays[i]).toBeGreaterThanOrEqual(delays[i - 1]!);
  });

  it('turns a missed deadline into KINF_ERR_REDIS_TIMEOUT', async () => {
    const never = () => new Promise<never>(() => {});
    await expect(withDeadline(never, 5, 'lookup')).rejects.toMatchObject({ code: 'KINF_ERR_REDIS_TIMEOUT' });
    await expect(withDeadline(async () => 42, 1000, 'lookup')).resolves.toBe(42);
  });

  it('tells the work when its caller has given up, so a multi-call write sends nothing more', async () => {
    let seen: (() => boolean) | null = null;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const p = withDeadline(
      async (expired) => {
        seen = expired;
        expect(expired()).toBe(false);
        await gate;
        return expired();
      },
      5,
      'apply',
    );
    await expect(p).rejects.toMatchObject({ code: 'KINF_ERR_REDIS_TIMEOUT' });
    expect(seen!()).toBe(true);
    release();
  });

  it('hides the password of a Redis URL in logs', () => {
    expect(redactUrl('redis://user:secret@10.0.0.1:6379/0')).toBe('redis://***@10.0.0.1:6379/0');
    expect(redactUrl('rediss://10.0.0.1:6379')).toBe('rediss://10.0.0.1:6379');
  });

  it('maps foreign errors to KINF_ERR_REDIS and keeps coded ones', () => {
    const e = asIndexError(new Error('ECONNRESET'), 'apply');
    expect(e).toMatchObject({ code: 'KINF_ERR_REDIS', message: 'apply: ECONNRESET' });
    expect(e.cause).toBeInstanceOf(Error);
    const coded = new KinferenceError('KINF_ERR_INDEX_REPLY', 'x');
    expect(asIndexError(coded, 'lookup')).toBe(coded);
  });
});

describe('redisTlsOptions', () => {
  it('reads the files once, as PEM buffers, and refuses what cannot work', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kinf-tls-unit-'));
    try {
      const ca = join(dir, 'ca.crt');
      writeFileSync(ca, 'CA PEM');
      expect(redisTlsOptions('redis://h:6379')).toBeUndefined();
      expect(redisTlsOptions('rediss://h:6380')).toEqual({});
      expect(redisTlsOptions('rediss://h:6380', { caFile: ca, servername: 'redis.internal' })).toEqual({
        ca: Buffer.from('CA PEM'),
        servername: 'redis.internal',
      });
      expect(() => redisTlsOptions('redis://h:6379', { caFile: ca })).toThrow(
        /redis_tls_\* options are set, but redis_url is not rediss:\/\//,
      );
      expect(() => redisTlsOptions('rediss://h:6380', { certFile: ca })).toThrow(/go together/);
      expect(() => redisTlsOptions('rediss://h:6380', { caFile: join(dir, 'none.crt') })).toThrow(
        /^redis_tls_ca_file: cannot read .*none\.crt \(ENOENT/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
