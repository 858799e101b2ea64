// The Grafana dashboards in deploy/grafana name only series the collector really registers.
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CollectorMetrics } from '../../../src/collector/collector-metrics.js';
import { registerPluginMetrics } from '../../../src/collector/metrics/plugin-metrics.js';
import { registerUsageMetrics } from '../../../src/collector/metrics/usage-metrics.js';
import { createUsageRedis } from '../../../src/usage/index.js';

const dir = fileURLToPath(new URL('../../../deploy/grafana/', import.meta.url));
const path = `${dir}kinference-usage.json`;

/** Every series name the collector's /metrics can carry: its own registry plus the usage series. */
async function registeredSeries(): Promise<Set<string>> {
  const collector = new CollectorMetrics(
    () => [],
    () => [],
  );
  const usage = new Registry();
  // Never connected: the names come from the registration, not from a scrape.
  const client = createUsageRedis({ url: 'redis://127.0.0.1:1' });
  registerUsageMetrics(usage, { client, keyPrefix: 'p', exporting: () => false });
  registerPluginMetrics(usage, { client, keyPrefix: 'p', exporting: () => false });
  const out = new Set<string>();
  for (const reg of [collector.registry, usage])
    for (const m of reg.getMetricsAsArray()) {
      const { name, type } = m as unknown as { name: string; type: string };
      out.add(name);
      if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(name + s);
    }
  client.disconnect();
  return out;
}

function exprs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => exprs(n, out));
  else if (node && typeof node === 'object')
    for (const [k, v] of Object.entries(node)) {
      if ((k === 'expr' || k === 'query') && typeof v === 'string') out.push(v);
      else if (k === 'query' && v && typeof v === 'object' && 'query' in v) out.push(String(v.query));
      else exprs(v, out);
    }
  return out;
}

describe('deploy/grafana/kinference-usage.json', () => {
  const dashboard = JSON.parse(readFileSync(path, 'utf8')) as { panels: unknown[]; templating: unknown };

  it('every query names only series the collector registers, and uses the usage and collector series', async () => {
    const series = await registeredSeries();
    const queries = exprs(dashboard);
    expect(queries.length).toBeGreaterThan(15);
    const named = new Set(queries.flatMap((q) => q.match(/\bkinference_[a-z0-9_]+/g) ?? []));
    const unknown = [...named].filter((n) => !series.has(n));
    expect(unknown).toEqual([]);
    expect([...named].some((n) => n.startsWith('kinference_usage_'))).toBe(true);
    expect([...named].some((n) => n.startsWith('kinference_collector_'))).toBe(true);
  });

  it('never groups or filters by tenant (the series have no tenant label)', () => {
    for (const q of exprs(dashboard)) expect(q).not.toMatch(/tenant/);
  });
});

describe('every dashboard in deploy/grafana', () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

  it.each(files)('%s names only registered series, never a tenant', async (file) => {
    const series = await registeredSeries();
    const queries = exprs(JSON.parse(readFileSync(`${dir}${file}`, 'utf8')));
    const named = new Set(queries.flatMap((q) => q.match(/\bkinference_[a-z0-9_]+/g) ?? []));
    expect(named.size).toBeGreaterThan(5);
    expect([...named].filter((n) => !series.has(n))).toEqual([]);
    for (const q of queries) expect(q).not.toMatch(/tenant/);
  });
});
