// `kinference collector --config`: the collector process (index, lease, /metrics, /healthz, clean stop).
import { validateConfig } from '../config/validate.js';
import { CollectorSectionSchema } from '../config/collector-section.js';
import { loadFleetConfig } from '../config/fleet-config.js';
import { redisSentinelSettings, redisTlsSettings } from '../config/plugin-config.js';
import { KinferenceError, isKinferenceError } from '../core/errors.js';
import {
  RedisWriterLease,
  createKvIndex,
  formatLeaseHolder,
  redactUrl,
  thisProcessHolder,
} from '../index/index.js';
import { Collector } from './collector.js';
import { KubernetesDiscovery, loadKubeConfig } from './discovery/kubernetes.js';
import { StaticDiscovery } from './discovery/static.js';
import { startCollectorServer } from './http-server.js';
import { createLogger } from './logger.js';
import { registerPluginMetrics } from './metrics/plugin-metrics.js';
import { shardLeaseName } from './pod-shard.js';
import { registerUsageMetrics } from './metrics/usage-metrics.js';
import { createUsageRedis } from '../usage/index.js';

/**
 * `kinference collector --config <file.yaml>`: follow every pod of the fleet, keep the index true, serve
 * /metrics and /healthz. SIGTERM/SIGINT: stop subscribers, flush queued writes, release the writer lease,
 * close Redis, exit 0. While another collector holds the writer lease it stands by (/healthz 503); if the
 * lease is lost to another one (a renewal finds it, or Redis refuses a fenced write), it drops every
 * write and exits 1, to come back as a standby.
 */
export async function runCollector(configPath: string): Promise<void> {
  const fleet = loadFleetConfig(configPath);
  const settings = fleet.collector ?? validateConfig(CollectorSectionSchema, {}, `${configPath}: collector`);
  const log = createLogger(settings.log_level, undefined, { component: 'collector' });
  // This process as the writer lease names it; the index's writes are fenced with the same value.
  const holder = thisProcessHolder();
  // A shard of the fleet's pods (collector.shard_index of shard_count), written under its own lease.
  const shard = { index: settings.shard_index, count: settings.shard_count };
  // The index and the writer lease reach the same Redis.
  const redis = {
    url: fleet.redis_url,
    cluster: fleet.redis_cluster,
    clusterNodes: fleet.redis_cluster_nodes,
    tls: redisTlsSettings(fleet),
    sentinel: redisSentinelSettings(fleet),
    keyPrefix: fleet.redis_key_prefix,
  };
  // The index logs Redis connection loss and recovery, and writes Redis lost (each pod is then rebuilt).
  // Fenced: once another collector holds a model's lease, Redis refuses our writes to it, even those sent
  // before a renewal could notice (a freeze longer than the TTL); the refusal is a lost lease (exit 1).
  const index = createKvIndex({
    kind: 'redis',
    ...redis,
    log,
    fence: { holderValue: formatLeaseHolder(holder), shard: shardLeaseName(shard) },
  });
  const discovery = fleet.kubernetes
    ? new KubernetesDiscovery(fleet.kubernetes, log, settings.kubeconfig)
    : new StaticDiscovery(fleet.pods ?? []);
  const blockSizes = Object.fromEntries(Object.entries(fleet.models).map(([m, c]) => [m, c.block_size]));
  // The models whose pods this collector alone registers: the one it discovers in Kubernetes, or every model
  // of the static fleet. Pods of these models that it does not follow are removed from the index.
  const ownedModels = fleet.kubernetes ? [fleet.kubernetes.model] : Object.keys(fleet.models);
  // One writer per model: reference counts would double with two collectors on the same pods.
  const lease = new RedisWriterLease({
    ...redis,
    models: ownedModels,
    ttlMs: settings.writer_lease_ms,
    holder,
    shard: shardLeaseName(shard),
  });
  const collector = new Collector(settings, {
    index,
    discovery,
    log,
    blockSizes,
    ownedModels,
    shard,
    lease,
    // Exit at once: nothing more may be written, and the orchestrator restarts this one as a standby.
    onLeaseLost: () => {
      log.error('exiting with status 1: another collector writes the index now');
      process.exit(1);
    },
  });
  // Unusable Kubernetes credentials or a Redis database that does not exist: `kinference: <file>: …`,
  // exit 2, as for the listen address.
  const asConfigError = (e: unknown): unknown =>
    isKinferenceError(e, 'KINF_ERR_CONFIG')
      ? new KinferenceError(e.code, `${configPath}: ${e.message}`, { cause: e })
      : e;
  // Checked before the lease: a standby must not find out at takeover that it cannot discover its pods.
  if (fleet.kubernetes) {
    try {
      loadKubeConfig(settings.kubeconfig);
    } catch (e) {
      throw asConfigError(e);
    }
  }

  // The fleet's usage per class and model and the plugins' decision series (every Kong node's plugin writes
  // them to this Redis), exported by the lease holder only (metrics/usage-metrics.ts, metrics/plugin-metrics.ts).
  const usageRedis = createUsageRedis(redis);
  usageRedis.on('error', () => {});
  // With shards, shard 0's holder alone: the series are the fleet's, not a shard's.
  const exporting = (): boolean =>
    shard.index === 0 && (collector.leaseState === null || collector.leaseState === 'held');
  registerUsageMetrics(collector.metrics.registry, {
    client: usageRedis,
    keyPrefix: fleet.redis_key_prefix,
    exporting,
  });
  // The plugins' decision series (every plugin server flushes its counts to this Redis), same rule.
  registerPluginMetrics(collector.metrics.registry, {
    client: usageRedis,
    keyPrefix: fleet.redis_key_prefix,
    exporting,
  });
  const server = await startCollectorServer(collector, settings.listen).catch((e: unknown) => {
    // A busy or foreign listen address is a config error: `kinference: <file>: …`, exit 2.
    throw isKinferenceError(e) ? new KinferenceError(e.code, `${configPath}: ${e.message}`, { cause: e }) : e;
  });
  log.info('collector listening', {
    address: server.address,
    redis: redactUrl(fleet.redis_url),
    // With Sentinel the URL's host is not used: say where the primary comes from.
    ...(fleet.redis_sentinels?.length
      ? { sentinels: fleet.redis_sentinels, sentinelMaster: fleet.redis_sentinel_master }
      : {}),
  });
  // A standby may wait in start() for a long time: a signal meanwhile stops it like any other.
  const signal = new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  const started = collector.start();
  try {
    await Promise.race([started, signal]);
  } catch (e) {
    await collector.stop().catch(() => false); // gives the lease back if it was taken
    usageRedis.disconnect();
    await Promise.all([lease.close(), server.close(), index.close()]);
    throw asConfigError(e);
  }
  log.info('shutting down', { signal: await signal });
  const flushed = await collector.stop();
  await server.close();
  await lease.close();
  await index.close();
  usageRedis.disconnect();
  log.info('stopped', { flushed });
  process.exit(0);
}
