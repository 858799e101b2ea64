import { Type } from '@sinclair/typebox';

/** `collector:` section of the fleet YAML. Owned by the collector. */
export const CollectorSectionSchema = Type.Object({
  listen: Type.String({ default: '127.0.0.1:9090', description: 'host:port for /metrics and /healthz' }),
  scrape_interval_ms: Type.Integer({ default: 1000, minimum: 50, maximum: 600000 }),
  unhealthy_after_failures: Type.Integer({ default: 3, minimum: 1, maximum: 1000 }),
  block_map_max_entries: Type.Integer({ default: 1000000, minimum: 1000 }),
});
