// The limiter's store on Redis: one script call per hash tag (one per request unless a policy is shared).
import { RedisConnection, RedisScript, type RedisConnectionOptions } from '../index/index.js';
import { hashTagOf } from './limit-keys.js';
import { ADJUST_LUA, ADMIT_LUA } from './lua.js';
import type { LimitStore } from './store.js';
import type { AdmitReply, CounterChange, LimitPlan } from './types.js';

const ADMIT = new RedisScript('limits-admit', ADMIT_LUA);
const ADJUST = new RedisScript('limits-adjust', ADJUST_LUA);

export interface RedisLimitStoreOptions extends RedisConnectionOptions {
  url: string;
}

/** A plan cut by hash tag: on a Cluster a script may touch one slot only. */
interface Part {
  plan: LimitPlan;
  /** Index of each of the part's counters in the whole plan. */
  at: number[];
}

function split(plan: LimitPlan, cluster: boolean): Part[] {
  if (!cluster) return [{ plan, at: plan.counters.map((_, i) => i) }];
  const parts = new Map<string, Part>();
  const part = (tag: string): Part => {
    let p = parts.get(tag);
    if (!p) {
      p = { plan: { ...plan, counters: [], slot: null }, at: [] };
      parts.set(tag, p);
    }
    return p;
  };
  plan.counters.forEach((c, i) => {
    const p = part(hashTagOf(c.key));
    p.plan.counters.push(c);
    p.at.push(i);
  });
  if (plan.slot) part(hashTagOf(plan.slot.key)).plan.slot = plan.slot;
  return [...parts.values()];
}

function admitCall(plan: LimitPlan): { keys: string[]; args: string[] } {
  const keys = plan.counters.map((c) => c.key);
  const args = [String(plan.nowMs), String(plan.counters.length)];
  for (const c of plan.counters) args.push(String(c.limit), String(c.amount), String(Math.max(1, c.ttlMs)));
  if (plan.slot) {
    const s = plan.slot;
    keys.push(s.key);
    args.push(String(s.max), s.member, String(s.expiresMs), String(Math.max(1, s.ttlMs)));
  }
  return { keys, args };
}

function parseReply(reply: unknown, n: number): AdmitReply {
  if (!Array.isArray(reply) || reply.length !== n + 2 || !reply.every((x) => typeof x === 'number'))
    throw new Error('limits-admit: unexpected reply from Redis');
  const r = reply as number[];
  return { refused: r[0]! - 1, inFlight: r[1]!, values: r.slice(2) };
}

/**
 * Counters and slots in Redis, shared by every Kong node. On a standalone Redis one request is one script
 * call (all its keys); on a Cluster one call per hash tag: one, unless a `per: all` policy applies too. Then
 * every part runs at once, and a part that admitted while another refused is given back (adjust), so a
 * limit is still never passed; only a request racing that give-back can be refused that it would have fit.
 */
export class RedisLimitStore implements LimitStore {
  readonly conn: RedisConnection;
  readonly #cluster: boolean;

  constructor(o: RedisLimitStoreOptions) {
    this.conn = new RedisConnection(o.url, o);
    this.#cluster = o.cluster === true;
  }

  async admit(plan: LimitPlan): Promise<AdmitReply> {
    await this.conn.ready();
    const parts = split(plan, this.#cluster);
    const replies = await Promise.all(
      parts.map(async (p) =>
        parseReply(await ADMIT.run(this.conn.client, admitCall(p.plan)), p.plan.counters.length),
      ),
    );
    const n = plan.counters.length;
    const out: AdmitReply = { refused: -1, values: new Array<number>(n).fill(0), inFlight: 0 };
    replies.forEach((r, j) => {
      const p = parts[j]!;
      r.values.forEach((v, k) => (out.values[p.at[k]!] = v));
      if (p.plan.slot) out.inFlight = r.inFlight;
      if (r.refused >= 0 && out.refused < 0)
        out.refused = r.refused < p.plan.counters.length ? p.at[r.refused]! : n;
    });
    if (out.refused >= 0 && parts.length > 1) {
      // Give back what the other parts counted: all or nothing across slots too.
      const counted = parts.filter((_, j) => replies[j]!.refused < 0);
      await Promise.all(
        counted.map((p) =>
          this.adjust(
            p.plan.counters.map((c) => ({ key: c.key, delta: -c.amount })),
            p.plan.slot,
            plan.nowMs,
          ),
        ),
      );
      for (const p of counted)
        p.at.forEach((i) => (out.values[i] = out.values[i]! - plan.counters[i]!.amount));
    }
    return out;
  }

  async adjust(
    changes: CounterChange[],
    slot: { key: string; member: string } | null,
    nowMs: number,
  ): Promise<void> {
    await this.conn.ready();
    const byTag = new Map<
      string,
      { changes: CounterChange[]; slot: { key: string; member: string } | null }
    >();
    const group = (key: string) => {
      const t = this.#cluster ? hashTagOf(key) : '';
      let g = byTag.get(t);
      if (!g) byTag.set(t, (g = { changes: [], slot: null }));
      return g;
    };
    for (const c of changes) if (c.delta !== 0) group(c.key).changes.push(c);
    if (slot) group(slot.key).slot = slot;
    void nowMs;
    await Promise.all(
      [...byTag.values()].map((g) => {
        const keys = g.changes.map((c) => c.key);
        const args = [String(g.changes.length), ...g.changes.map((c) => String(Math.round(c.delta)))];
        if (g.slot) {
          keys.push(g.slot.key);
          args.push(g.slot.member);
        }
        return ADJUST.run(this.conn.client, { keys, args });
      }),
    );
  }

  close(): Promise<void> {
    return this.conn.close();
  }
}
