// ReservationStore on Redis: the routers' shared reservations, one sorted set per model.
import { KinferenceError } from '../core/errors.js';
import type { ReservationStore, SharedReservation } from './kv-index.js';
import type { RedisIndexContext } from './redis-index-context.js';
import { reservationsKey } from './redis-keys.js';
import { SCRIPTS } from './redis-scripts.js';
import { parseReservationMember, reservationMember } from './reservation-member.js';

/** ReservationStore on Redis: one sorted set per model, scored by atMs (redis-keys.ts). */
export class RedisReservationStore implements ReservationStore {
  constructor(private readonly ctx: RedisIndexContext) {}

  async shareReservation(model: string, r: SharedReservation, ttlMs: number): Promise<void> {
    const key = reservationsKey(this.ctx.base(model));
    await this.ctx.run('shareReservation', this.ctx.settings.commandTimeoutMs, async () => {
      // One round trip; the key lives as long as reservations keep coming, and no older one outlives ttlMs.
      const res = await this.ctx.conn.client
        .multi()
        .zadd(key, r.atMs, reservationMember(r))
        .zremrangebyscore(key, '-inf', `(${r.atMs - ttlMs}`)
        .pexpire(key, Math.max(1, 2 * ttlMs))
        .exec();
      const failed = res?.find(([err]) => err !== null)?.[0];
      if (failed) throw failed;
    });
  }

  async endReservation(model: string, r: SharedReservation): Promise<void> {
    const key = reservationsKey(this.ctx.base(model));
    await this.ctx.run('endReservation', this.ctx.settings.commandTimeoutMs, () =>
      this.ctx.conn.client.zrem(key, reservationMember(r)),
    );
  }

  async sharedReservations(
    model: string,
    sinceMs: number,
    limit: number,
    exceptRouter?: string,
  ): Promise<SharedReservation[]> {
    const key = reservationsKey(this.ctx.base(model));
    const flat = await this.ctx.run('sharedReservations', this.ctx.settings.lookupTimeoutMs, async () => {
      const call = { keys: [key], args: [String(sinceMs), String(limit), exceptRouter ?? ''] };
      const reply = await SCRIPTS.sharedReservations.run(this.ctx.conn.client, call);
      if (!Array.isArray(reply) || !reply.every((x) => typeof x === 'string'))
        throw new KinferenceError('KINF_ERR_INDEX_REPLY', 'shared-reservations: not a list of strings');
      return reply as string[];
    });
    const out: SharedReservation[] = [];
    // Newest first from Redis; oldest first out.
    for (let i = flat.length - 2; i >= 0; i -= 2)
      out.push(parseReservationMember(flat[i]!, Number(flat[i + 1])));
    return out;
  }
}
