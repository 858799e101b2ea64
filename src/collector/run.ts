import { validateConfig } from '../config/validate.js';
import { CollectorSectionSchema } from '../config/collector-section.js';
import { loadFleetConfig } from '../config/fleet-config.js';
import { KinferenceError, isKinferenceError } from '../core/errors.js';
import { createKvIndex } from '../index/index.js';
import { Collector } from './collector.js';
import { KubernetesDiscovery } from './discovery/kubernetes.js';
import { StaticDiscovery } from './discovery/static.js';
import { startCollectorServer } from './http-server.js';
import { createLogger } from './logger.js';

/**
 * `kinference collector --config <file.yaml>`: follow every pod of the fleet, keep the index true, serve
 * /metrics and /healthz. SIGTERM/SIGINT: stop subscribers, flush queued writes, close Redis, exit 0.
 */
export async function runCollector(configPath: string): Promise<void> {
  const fleet = loadFleetConfig(configPath);
  const settings = fleet.collector ?? validateConfig(CollectorSectionSchema, {}, `${configPath}: collector`);
  const log = createLogger(settings.log_level, undefined, { component: 'collector' });
  // The index logs Redis connection loss and recovery, and writes Redis lost (each pod is then rebuilt).
  const index = createKvIndex({
    kind: 'redis',
    url: fleet.redis_url,
    keyPrefix: fleet.redis_key_prefix,
    log,
  });
  const discovery = fleet.kubernetes
    ? new KubernetesDiscovery(fleet.kubernetes, log, settings.kubeconfig)
    : new StaticDiscovery(fleet.pods ?? []);
  const blockSizes = Object.fromEntries(Object.entries(fleet.models).map(([m, c]) => [m, c.block_size]));
  // The models whose pods this collector alone registers: the one it discovers in Kubernetes, or every model
  // of the static fleet. Pods of these models that it does not follow are removed from the index.
  const ownedModels = fleet.kubernetes ? [fleet.kubernetes.model] : Object.keys(fleet.models);
  const collector = new Collector(settings, { index, discovery, log, blockSizes, ownedModels });
  const server = await startCollectorServer(collector, settings.listen).catch((e: unknown) => {
    // A busy or foreign listen address is a config error: `kinference: <file>: …`, exit 2.
    throw isKinferenceError(e) ? new KinferenceError(e.code, `${configPath}: ${e.message}`, { cause: e }) : e;
  });
  log.info('collector listening', {
    address: server.address,
    redis: fleet.redis_url.replace(/\/\/[^@/]*@/, '//***@'),
  });
  await collector.start().catch((e: unknown) => {
    // Unusable Kubernetes credentials: `kinference: <file>: …`, exit 2, as for the listen address.
    throw isKinferenceError(e, 'KINF_ERR_CONFIG')
      ? new KinferenceError(e.code, `${configPath}: ${e.message}`, { cause: e })
      : e;
  });

  await new Promise<void>((resolve) => {
    const shutdown = (signal: string): void => {
      log.info('shutting down', { signal });
      resolve();
    };
    process.once('SIGTERM', () => shutdown('SIGTERM'));
    process.once('SIGINT', () => shutdown('SIGINT'));
  });
  const flushed = await collector.stop();
  await server.close();
  await index.close();
  log.info('stopped', { flushed });
  process.exit(0);
}
