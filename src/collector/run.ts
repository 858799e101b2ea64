import { validateConfig } from '../config/validate.js';
import { CollectorSectionSchema } from '../config/collector-section.js';
import { loadFleetConfig } from '../config/fleet-config.js';
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
  const index = createKvIndex({ kind: 'redis', url: fleet.redis_url, keyPrefix: fleet.redis_key_prefix });
  const discovery = fleet.kubernetes
    ? new KubernetesDiscovery(fleet.kubernetes, log, settings.kubeconfig)
    : new StaticDiscovery(fleet.pods ?? []);
  const blockSizes = Object.fromEntries(Object.entries(fleet.models).map(([m, c]) => [m, c.block_size]));
  const collector = new Collector(settings, { index, discovery, log, blockSizes });
  const server = await startCollectorServer(collector, settings.listen);
  log.info('collector listening', {
    address: server.address,
    redis: fleet.redis_url.replace(/\/\/[^@/]*@/, '//***@'),
  });
  await collector.start();

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
