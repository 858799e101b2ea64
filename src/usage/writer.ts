// Writes usage records to Redis: one script on the hour's keys (cap, counters, TTL) + fleet totals.
import type { Cluster, Redis } from 'ioredis';
import {
  DEFAULT_MAX_TENANTS_PER_HOUR,
  FLOAT_FIELDS,
  OVERFLOW_TENANT,
  hourBase,
  hourOf,
  metricsFieldPrefix,
  metricsKey,
  recordMember,
  usageIncrements,
  type UsageEvent,
} from './record.js';

/**
 * KEYS: the hour's tenants set, its index, the tenant's record, the overflow record. ARGV: cap, TTL seconds,
 * tenant, the two index members, then field/increment pairs. A tenant new this hour past the cap is counted
 * under the overflow record. Returns 1 when counted under its own name, 0 under the overflow.
 */
const RECORD_SCRIPT = `
local rec, member, own = KEYS[3], ARGV[4], 1
if redis.call('SISMEMBER', KEYS[1], ARGV[3]) == 0 then
  if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then
    rec, member, own = KEYS[4], ARGV[5], 0
  else
    redis.call('SADD', KEYS[1], ARGV[3])
  end
end
redis.call('SADD', KEYS[2], member)
for i = 6, #ARGV, 2 do
  local f = ARGV[i]
  if f == 'cost' or f == 'saving' or f == 'ttft_sum_ms' then
    redis.call('HINCRBYFLOAT', rec, f, ARGV[i + 1])
  else
    redis.call('HINCRBY', rec, f, ARGV[i + 1])
  end
end
local ttl = tonumber(ARGV[2])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', rec, ttl)
return own
`;

/** KEYS: the fleet totals hash. ARGV: the class/model field prefix, then field/increment pairs. */
const METRICS_SCRIPT = `
for i = 2, #ARGV, 2 do
  local f = ARGV[i]
  if f == 'cost' or f == 'saving' or f == 'ttft_sum_ms' then
    redis.call('HINCRBYFLOAT', KEYS[1], ARGV[1] .. f, ARGV[i + 1])
  else
    redis.call('HINCRBY', KEYS[1], ARGV[1] .. f, ARGV[i + 1])
  end
end
return 1
`;

type Scripted = {
  kinfUsageRecord(...args: (string | number)[]): Promise<number>;
  kinfUsageMetrics(...args: (string | number)[]): Promise<number>;
};

export interface UsageWriterOptions {
  keyPrefix: string;
  retentionDays: number;
  maxTenantsPerHour?: number;
  /** A standalone Redis takes both scripts in one pipeline; a Cluster gets them apart (two slots). */
  cluster?: boolean;
}

/** Integers stay integers (HINCRBY refuses "1.0"); floats keep 12 significant digits. */
const arg = (f: string, v: number): string =>
  FLOAT_FIELDS.has(f) ? String(Number(v.toPrecision(12))) : String(Math.round(v));

/**
 * The log phase's writer: one round trip per request on a standalone Redis (a pipeline of two scripts), two
 * concurrent ones on a Cluster. Failures reject; the caller logs them once and goes on.
 */
export class UsageWriter {
  readonly #client: Redis | Cluster;
  readonly #o: Required<UsageWriterOptions>;
  #connecting: Promise<void> | null = null;

  constructor(client: Redis | Cluster, o: UsageWriterOptions) {
    this.#client = client;
    this.#o = { maxTenantsPerHour: DEFAULT_MAX_TENANTS_PER_HOUR, cluster: false, ...o };
    client.defineCommand('kinfUsageRecord', { numberOfKeys: 4, lua: RECORD_SCRIPT });
    client.defineCommand('kinfUsageMetrics', { numberOfKeys: 1, lua: METRICS_SCRIPT });
  }

  async #ready(): Promise<void> {
    const c = this.#client;
    if (c.status === 'ready') return;
    if (c.status === 'wait' || this.#connecting) {
      this.#connecting ??= c.connect().finally(() => (this.#connecting = null));
      return this.#connecting;
    }
    throw new Error(`Redis connection is ${c.status}: usage record dropped`);
  }

  /** Counts one request; resolves true when it was counted under its own tenant, false under the overflow. */
  async record(e: UsageEvent): Promise<boolean> {
    await this.#ready();
    const { keyPrefix, retentionDays, maxTenantsPerHour } = this.#o;
    const hour = hourOf(e.atMs);
    const base = hourBase(keyPrefix, hour);
    const incs = usageIncrements(e);
    const pairs = incs.flatMap(([f, v]) => [f, arg(f, v)]);
    const own = recordMember(e.tenant, e.model);
    const over = recordMember(OVERFLOW_TENANT, e.model);
    const recordArgs = [
      `${base}tenants`,
      `${base}index`,
      `${base}r:${own}`,
      `${base}r:${over}`,
      maxTenantsPerHour,
      Math.max(1, Math.round(retentionDays * 86400)),
      e.tenant,
      own,
      over,
      ...pairs,
    ];
    const metricsArgs = [metricsKey(keyPrefix), metricsFieldPrefix(e.serviceClass, e.model), ...pairs];
    const c = this.#client as unknown as Scripted & (Redis | Cluster);
    if (this.#o.cluster) {
      const [counted] = await Promise.all([
        c.kinfUsageRecord(...recordArgs),
        c.kinfUsageMetrics(...metricsArgs),
      ]);
      return counted === 1;
    }
    const p = this.#client.pipeline() as unknown as Scripted & {
      exec(): Promise<[Error | null, unknown][] | null>;
    };
    void p.kinfUsageRecord(...recordArgs);
    void p.kinfUsageMetrics(...metricsArgs);
    const res = (await p.exec()) ?? [];
    const failed = res.find(([err]) => err !== null);
    if (failed) throw failed[0]!;
    return res[0]?.[1] === 1;
  }
}
