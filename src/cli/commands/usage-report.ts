// `kinference usage`: the usage records from the fleet's Redis, grouped, as a table, JSON or CSV.
import { loadFleetConfig } from '../../config/fleet-config.js';
import { redisTlsSettings } from '../../config/plugin-config.js';
import { KinferenceError } from '../../core/errors.js';
import { redactUrl } from '../../index/index.js';
import {
  TTFT_BUCKETS_MS,
  addTotals,
  createUsageRedis,
  readUsage,
  zeroTotals,
  type UsageRow,
  type UsageTotals,
} from '../../usage/index.js';

export const GROUP_KEYS = ['tenant', 'model', 'hour'] as const;
export type GroupKey = (typeof GROUP_KEYS)[number];
export const FORMATS = ['table', 'json', 'csv'] as const;
type Format = (typeof FORMATS)[number];

const configError = (msg: string): KinferenceError => new KinferenceError('KINF_ERR_CONFIG', msg);

/** An ISO 8601 date/time (UTC unless it says otherwise), or a time ago: 90m, 24h, 7d. */
export function parseTime(option: string, v: string, nowMs: number): number {
  const ago = /^(\d+)([mhd])$/.exec(v);
  if (ago)
    return nowMs - Number(ago[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[ago[2] as 'm' | 'h' | 'd'];
  const iso = /^\d{4}-\d{2}-\d{2}(T\d{2}(:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(v);
  const withZone = /T.*(Z|[+-]\d{2}:?\d{2})$/.test(v) || !v.includes('T') ? v : `${v}Z`;
  const t = iso ? Date.parse(/^\d{4}-\d{2}-\d{2}T\d{2}$/.test(v) ? `${v}:00Z` : withZone) : NaN;
  if (!Number.isFinite(t))
    throw configError(
      `${option}: "${v}" is not a time (expected ISO 8601 such as 2026-12-06 or 2026-12-06T10:00Z, or a time ago such as 90m, 24h or 7d)`,
    );
  return t;
}

export function parseBy(v: string): GroupKey[] {
  const keys = v.split(',').map((k) => k.trim());
  for (const k of keys)
    if (!(GROUP_KEYS as readonly string[]).includes(k))
      throw configError(`--by: "${k}" is not a grouping (expected tenant, model or hour, comma-separated)`);
  if (new Set(keys).size !== keys.length) throw configError(`--by: "${v}" names a grouping twice`);
  return keys as GroupKey[];
}

export interface ReportRow {
  group: Partial<Record<GroupKey, string>>;
  totals: UsageTotals;
}

/** Rows summed per group, in the order of the group's values. */
export function groupRows(rows: readonly UsageRow[], by: readonly GroupKey[]): ReportRow[] {
  const groups = new Map<string, ReportRow>();
  for (const r of rows) {
    const group: Partial<Record<GroupKey, string>> = {};
    for (const k of by) group[k] = r[k];
    const key = JSON.stringify(by.map((k) => group[k]));
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { group, totals: zeroTotals() }));
    addTotals(g.totals, r.totals);
  }
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, g]) => g);
}

/** The upper bound (ms) of the bucket holding quantile q of the TTFTs; null without TTFTs; Infinity above all. */
export function ttftQuantileBound(t: UsageTotals, q: number): number | null {
  if (t.ttft_count === 0) return null;
  const rank = q * t.ttft_count;
  let acc = 0;
  for (const b of TTFT_BUCKETS_MS) {
    acc += t[`ttft_le_${b}` as keyof UsageTotals];
    if (acc >= rank) return b;
  }
  return Infinity;
}

const round = (x: number, digits: number): number => Number(x.toFixed(digits));
const costText = (x: number): number => Number(x.toPrecision(6));

/** One group as the JSON and CSV formats give it (every figure; the table shows a selection). */
export function rowJson(r: ReportRow) {
  const t = r.totals;
  const forwarded = t.requests - t.shed;
  const output = t.output_tokens_exact + t.output_tokens_estimated;
  const bound = (q: number): number | string | null => {
    const b = ttftQuantileBound(t, q);
    return b === Infinity ? `>${TTFT_BUCKETS_MS[TTFT_BUCKETS_MS.length - 1]}` : b;
  };
  return {
    ...r.group,
    requests: t.requests,
    shed: t.shed,
    prompt_tokens: t.prompt_tokens,
    cached_prompt_tokens: t.cached_tokens,
    cache_hit_ratio: t.prompt_tokens > 0 ? round(t.cached_tokens / t.prompt_tokens, 4) : null,
    output_tokens: output,
    output_tokens_estimated: t.output_tokens_estimated,
    output_unknown_requests: t.output_unknown,
    ttft_count: t.ttft_count,
    ttft_mean_ms: t.ttft_count > 0 ? round(t.ttft_sum_ms / t.ttft_count, 1) : null,
    ttft_p50_le_ms: bound(0.5),
    ttft_p95_le_ms: bound(0.95),
    ttft_buckets_ms: Object.fromEntries([
      ...TTFT_BUCKETS_MS.map((b) => [`le_${b}`, t[`ttft_le_${b}` as keyof UsageTotals]]),
      ['above', t.ttft_le_inf],
    ]),
    cost: costText(t.cost),
    cost_saving_from_cache: costText(t.saving),
    unpriced_requests: t.unpriced,
    /** Cost is complete when every forwarded request was priced; else it covers the priced ones only. */
    cost_complete: t.unpriced === 0 || forwarded === 0,
  };
}

function csvCell(v: unknown): string {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function formatCsv(rows: ReportRow[], by: readonly GroupKey[]): string {
  const json = rows.map(rowJson);
  const cols = [
    ...by,
    ...Object.keys(rowJson({ group: {}, totals: zeroTotals() })).filter((c) => c !== 'ttft_buckets_ms'),
  ];
  const lines = [cols.join(',')];
  for (const r of json) lines.push(cols.map((c) => csvCell((r as Record<string, unknown>)[c])).join(','));
  return `${lines.join('\n')}\n`;
}

export function formatTable(rows: ReportRow[], by: readonly GroupKey[]): string {
  const head = [
    ...by,
    'requests',
    'shed',
    'prompt',
    'cached',
    'hit%',
    'output',
    'ttft p50',
    'ttft p95',
    'cost',
    'saved',
  ];
  const body = rows.map((r) => {
    const j = rowJson(r);
    const est = j.output_tokens_estimated > 0 ? '~' : '';
    const le = (b: number | string | null): string =>
      b === null ? '-' : typeof b === 'number' ? `≤${b}ms` : `${b}ms`;
    return [
      ...by.map((k) => r.group[k] ?? ''),
      String(j.requests),
      String(j.shed),
      String(j.prompt_tokens),
      String(j.cached_prompt_tokens),
      j.cache_hit_ratio === null ? '-' : (j.cache_hit_ratio * 100).toFixed(1),
      `${est}${j.output_tokens}`,
      le(j.ttft_p50_le_ms),
      le(j.ttft_p95_le_ms),
      j.cost_complete ? String(j.cost) : `${j.cost}+?`,
      String(j.cost_saving_from_cache),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i < by.length ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const notes = [
    '~ output tokens estimated from the bytes Kong sent (docs/usage.md); cost in policies.currency;',
    '+? some requests had no price for a token type they used; ttft: upper bound of the bucket holding p50/p95',
  ];
  return `${[line(head), ...body.map(line)].join('\n')}\n\n${notes.join('\n')}\n`;
}

export async function runUsage(opts: {
  config: string;
  from: string;
  to?: string;
  by: string;
  format: string;
}): Promise<void> {
  const now = Date.now();
  const fromMs = parseTime('--from', opts.from, now);
  const toMs = opts.to === undefined ? now : parseTime('--to', opts.to, now);
  if (toMs < fromMs)
    throw configError(
      `--to (${new Date(toMs).toISOString()}) is before --from (${new Date(fromMs).toISOString()})`,
    );
  if (toMs - fromMs > 3660 * 86_400_000)
    throw configError('--from/--to: at most 3660 days (the longest retention)');
  const by = parseBy(opts.by);
  if (!(FORMATS as readonly string[]).includes(opts.format))
    throw configError(`--format: "${opts.format}" is not a format (expected table, json or csv)`);
  const format = opts.format as Format;
  const fleet = loadFleetConfig(opts.config);
  const tls = redisTlsSettings(fleet);
  const client = createUsageRedis({
    url: fleet.redis_url,
    cluster: fleet.redis_cluster,
    ...(fleet.redis_cluster_nodes ? { clusterNodes: fleet.redis_cluster_nodes } : {}),
    ...(tls ? { tls } : {}),
  });
  client.on('error', () => {});
  let rows: UsageRow[];
  try {
    await client.connect();
    rows = await readUsage(client, fleet.redis_key_prefix, fromMs, toMs);
  } catch (e) {
    throw new KinferenceError(
      'KINF_ERR_REDIS',
      `${opts.config}: cannot read usage records from Redis at ${redactUrl(fleet.redis_url)}: ${(e as Error).message}`,
      { cause: e },
    );
  } finally {
    client.disconnect();
  }
  const grouped = groupRows(rows, by);
  if (format === 'json') {
    const total = rowJson({ group: {}, totals: rows.reduce((a, r) => addTotals(a, r.totals), zeroTotals()) });
    const out = {
      from: new Date(fromMs).toISOString(),
      to: new Date(toMs).toISOString(),
      by,
      rows: grouped.map(rowJson),
      total,
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  } else if (format === 'csv') process.stdout.write(formatCsv(grouped, by));
  else if (grouped.length === 0)
    process.stdout.write(
      `no usage records from ${new Date(fromMs).toISOString()} to ${new Date(toMs).toISOString()} (is policies set in the plugin config?)\n`,
    );
  else process.stdout.write(formatTable(grouped, by));
}
