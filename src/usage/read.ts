// Reads usage records back from Redis: per tenant/model/hour over a time range, and the fleet totals.
import type { Cluster, Redis } from 'ioredis';
import {
  USAGE_FIELDS,
  hourBase,
  hourOf,
  hourStartMs,
  metricsKey,
  zeroTotals,
  type UsageField,
  type UsageTotals,
} from './record.js';

export interface UsageRow {
  /** YYYYMMDDHH, UTC. */
  hour: string;
  tenant: string;
  model: string;
  totals: UsageTotals;
}

const FIELDS: ReadonlySet<string> = new Set(USAGE_FIELDS);

function totalsOf(h: Record<string, string>): UsageTotals {
  const t = zeroTotals();
  for (const [k, v] of Object.entries(h)) if (FIELDS.has(k)) t[k as UsageField] = Number(v) || 0;
  return t;
}

/** The UTC hours from the one holding `fromMs` to the one holding `toMs`, both included. */
export function hoursBetween(fromMs: number, toMs: number): string[] {
  const out: string[] = [];
  for (let t = hourStartMs(hourOf(fromMs)); t <= toMs; t += 3_600_000) out.push(hourOf(t));
  return out;
}

/**
 * Every record of the hours from `fromMs` to `toMs`: per hour one SMEMBERS of its index, then one pipeline of
 * HGETALLs (an hour's keys share a slot, so this holds on a Cluster too).
 */
export async function readUsage(
  client: Redis | Cluster,
  keyPrefix: string,
  fromMs: number,
  toMs: number,
): Promise<UsageRow[]> {
  const rows: UsageRow[] = [];
  for (const hour of hoursBetween(fromMs, toMs)) {
    const base = hourBase(keyPrefix, hour);
    const members = (await client.smembers(`${base}index`)).sort();
    if (members.length === 0) continue;
    const p = client.pipeline();
    for (const m of members) p.hgetall(`${base}r:${m}`);
    const res = (await p.exec()) ?? [];
    members.forEach((m, i) => {
      const [err, h] = res[i] ?? [null, {}];
      if (err) throw err;
      const [tenant, model] = JSON.parse(m) as [string, string];
      const hash = (h ?? {}) as Record<string, string>;
      if (Object.keys(hash).length > 0) rows.push({ hour, tenant, model, totals: totalsOf(hash) });
    });
  }
  return rows;
}

export interface FleetTotals {
  serviceClass: string;
  model: string;
  totals: UsageTotals;
}

/** The fleet-wide totals per class and model, cumulative since the first record (the collector exports them). */
export async function readFleetTotals(client: Redis | Cluster, keyPrefix: string): Promise<FleetTotals[]> {
  const h = await client.hgetall(metricsKey(keyPrefix));
  const by = new Map<string, FleetTotals>();
  for (const [k, v] of Object.entries(h)) {
    const [serviceClass, model, field] = k.split('\t');
    if (serviceClass === undefined || model === undefined || field === undefined || !FIELDS.has(field))
      continue;
    const key = `${serviceClass}\t${model}`;
    let t = by.get(key);
    if (!t) by.set(key, (t = { serviceClass, model, totals: zeroTotals() }));
    t.totals[field as UsageField] = Number(v) || 0;
  }
  return [...by.values()].sort((a, b) =>
    a.serviceClass === b.serviceClass
      ? a.model.localeCompare(b.model)
      : a.serviceClass.localeCompare(b.serviceClass),
  );
}

/** Adds b into a, field by field. */
export function addTotals(a: UsageTotals, b: UsageTotals): UsageTotals {
  for (const f of USAGE_FIELDS) a[f] = (a[f] ?? 0) + (b[f] ?? 0);
  return a;
}
